// Factor analysis with a non-square cholesky_factor_cov loading matrix (D x Q, D >= Q).
data {
  int<lower=1> N;
  int<lower=1> D;
  int<lower=1, upper=D> Q;
  array[N] vector[D] y;
}
parameters {
  cholesky_factor_cov[D, Q] Lambda;
  vector<lower=0>[D] psi;
  vector[D] mu;
}
model {
  matrix[D, D] Sigma = tcrossprod(Lambda);
  for (d in 1:D) Sigma[d, d] += square(psi[d]);
  to_vector(Lambda) ~ normal(0, 1);
  psi ~ lognormal(0, 1);
  mu ~ normal(0, 5);
  y ~ multi_normal(mu, Sigma);
}
