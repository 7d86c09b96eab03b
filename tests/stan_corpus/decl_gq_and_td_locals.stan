// Constrained declarations in transformed data and generated quantities (validated at runtime),
// unconstrained local declarations in the model block.
transformed data {
  int<lower=0> n = 3;
  simplex[3] p0 = [0.2, 0.3, 0.5]';
  corr_matrix[2] R0 = [[1, 0.3], [0.3, 1]];
  cov_matrix[2] S0 = 2 * R0;
  cholesky_factor_cov[2] L0 = cholesky_decompose(S0);
  cholesky_factor_corr[2] Lr = cholesky_decompose(R0);
  ordered[3] o0 = [1, 2, 3]';
  positive_ordered[2] po0 = [0.5, 1.5]';
  unit_vector[2] u0 = [0.6, 0.8]';
}
parameters {
  vector[2] x;
}
model {
  vector[2] mu = rep_vector(0, 2);
  matrix[2, 2] L = L0;
  real acc = 0;
  int cnt = 0;
  x ~ multi_normal_cholesky(mu, L);
}
generated quantities {
  simplex[3] p = p0;
  real<lower=0> nrm = dot_self(x);
  int<lower=0, upper=1> pos = x[1] > 0;
  array[n] int<lower=1, upper=3> draws;
  for (i in 1:n) draws[i] = categorical_rng(p);
}
