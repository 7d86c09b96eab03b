// Radon-style hierarchical model: varying intercepts by county, common slope.
data {
  int<lower=1> N;
  int<lower=1> J;
  array[N] int<lower=1, upper=J> county;
  vector[N] x;
  vector[N] y;
}
parameters {
  vector[J] a;
  real beta;
  real mu_a;
  real<lower=0> sigma_a;
  real<lower=0> sigma_y;
}
model {
  mu_a ~ normal(0, 10);
  sigma_a ~ normal(0, 5);
  sigma_y ~ normal(0, 5);
  beta ~ normal(0, 10);
  a ~ normal(mu_a, sigma_a);
  y ~ normal(a[county] + beta * x, sigma_y);
}
