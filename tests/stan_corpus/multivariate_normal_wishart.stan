// Multivariate normal with unknown mean and cov_matrix under an inverse-Wishart prior.
data {
  int<lower=1> N;
  int<lower=1> D;
  array[N] vector[D] y;
}
transformed data {
  cov_matrix[D] S0 = identity_matrix(D);
}
parameters {
  vector[D] mu;
  cov_matrix[D] Sigma;
}
model {
  Sigma ~ inv_wishart(D + 2, S0);
  mu ~ multi_normal(rep_vector(0, D), 10 * S0);
  y ~ multi_normal(mu, Sigma);
}
