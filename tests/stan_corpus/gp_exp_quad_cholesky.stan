// Gaussian process regression with gp_exp_quad_cov and a Cholesky-factored marginal likelihood.
data {
  int<lower=1> N;
  array[N] real x;
  vector[N] y;
}
transformed data {
  real delta = 1e-9;
}
parameters {
  real<lower=0> rho;
  real<lower=0> alpha;
  real<lower=0> sigma;
}
model {
  matrix[N, N] L_K;
  {
    matrix[N, N] K = gp_exp_quad_cov(x, alpha, rho);
    real sq_sigma = square(sigma);
    for (n in 1:N) {
      K[n, n] = K[n, n] + sq_sigma + delta;
    }
    L_K = cholesky_decompose(K);
  }
  rho ~ inv_gamma(5, 5);
  alpha ~ std_normal();
  sigma ~ std_normal();
  y ~ multi_normal_cholesky(rep_vector(0, N), L_K);
}
