// Conjugate gamma-Poisson model; target += only.
data {
  int<lower=0> N;
  array[N] int<lower=0> y;
  real<lower=0> alpha;
  real<lower=0> beta;
}
parameters {
  real<lower=0> lambda;
}
model {
  target += gamma_lpdf(lambda | alpha, beta);
  target += poisson_lpmf(y | lambda);
}
generated quantities {
  real post_mean = (alpha + sum(y)) / (beta + N);
}
