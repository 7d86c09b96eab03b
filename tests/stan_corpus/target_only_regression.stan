// Poisson log-linear regression written only with target += (no ~ anywhere).
data {
  int<lower=0> N;
  vector[N] x;
  array[N] int<lower=0> y;
  vector[N] log_exposure;
}
parameters {
  real alpha;
  real beta;
}
model {
  target += normal_lpdf(alpha | 0, 5);
  target += normal_lpdf(beta | 0, 2);
  target += poisson_log_lpmf(y | log_exposure + alpha + beta * x);
}
