// Regression with measurement error in the predictor (latent true covariate).
data {
  int<lower=0> N;
  vector[N] x_meas;
  real<lower=0> tau;
  vector[N] y;
}
parameters {
  vector[N] x;
  real mu_x;
  real<lower=0> sigma_x;
  real alpha;
  real beta;
  real<lower=0> sigma;
}
model {
  x ~ normal(mu_x, sigma_x);
  x_meas ~ normal(x, tau);
  y ~ normal(alpha + beta * x, sigma);
  alpha ~ normal(0, 10);
  beta ~ normal(0, 10);
  sigma ~ cauchy(0, 5);
  mu_x ~ normal(0, 10);
  sigma_x ~ cauchy(0, 5);
}
