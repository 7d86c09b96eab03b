// Count regression: negative binomial (neg_binomial_2_log) and poisson_log_glm.
data {
  int<lower=0> N;
  int<lower=1> K;
  matrix[N, K] X;
  array[N] int<lower=0> y;
}
parameters {
  real alpha;
  vector[K] beta;
  real<lower=0> phi;
}
model {
  alpha ~ normal(0, 2);
  beta ~ normal(0, 1);
  phi ~ gamma(2, 0.5);
  y ~ neg_binomial_2_log(alpha + X * beta, phi);
}
generated quantities {
  real ll_pois = poisson_log_glm_lpmf(y | X, alpha, beta);
}
