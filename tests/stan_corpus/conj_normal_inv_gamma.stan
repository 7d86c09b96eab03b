// Normal model with unknown mean and variance under a normal-inverse-gamma prior.
data {
  int<lower=0> N;
  vector[N] y;
}
parameters {
  real mu;
  real<lower=0> sigma2;
}
model {
  sigma2 ~ inv_gamma(2, 2);
  mu ~ normal(0, sqrt(sigma2 / 0.1));
  y ~ normal(mu, sqrt(sigma2));
}
