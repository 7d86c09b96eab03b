// Latent-variable GP classification with gp_matern32_cov and non-centred latent f.
data {
  int<lower=1> N;
  array[N] real x;
  array[N] int<lower=0, upper=1> z;
}
parameters {
  real<lower=0> rho;
  real<lower=0> alpha;
  real a;
  vector[N] eta;
}
transformed parameters {
  vector[N] f;
  {
    matrix[N, N] L = cholesky_decompose(add_diag(gp_matern32_cov(x, alpha, rho), 1e-8));
    f = L * eta;
  }
}
model {
  rho ~ inv_gamma(5, 5);
  alpha ~ std_normal();
  a ~ std_normal();
  eta ~ std_normal();
  z ~ bernoulli_logit(a + f);
}
