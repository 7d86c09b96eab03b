// Normal observations with known noise and a normal prior on the mean.
// The posterior and the evidence are analytic (see README.md in this folder).
data {
  int<lower=0> N;
  vector[N] y;
  real mu0;
  real<lower=0> tau0;
  real<lower=0> sigma;
}
parameters {
  real mu;
}
model {
  mu ~ normal(mu0, tau0);
  y ~ normal(mu, sigma);
}
