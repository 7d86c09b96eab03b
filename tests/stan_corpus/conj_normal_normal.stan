// Conjugate normal-normal model (known sigma) with analytic posterior in generated quantities.
data {
  int<lower=0> N;
  vector[N] y;
  real<lower=0> sigma;
  real mu0;
  real<lower=0> tau0;
}
parameters {
  real mu;
}
model {
  mu ~ normal(mu0, tau0);
  y ~ normal(mu, sigma);
}
generated quantities {
  real post_prec = 1 / tau0 ^ 2 + N / sigma ^ 2;
  real post_mean = (mu0 / tau0 ^ 2 + sum(y) / sigma ^ 2) / post_prec;
}
