// A Poisson rate with a gamma prior and category probabilities with a
// Dirichlet prior: a lower-bounded and a simplex parameter, both conjugate.
// The posterior and the evidence are analytic (see README.md in this folder).
data {
  int<lower=0> N;
  array[N] int<lower=0> y;          // Poisson counts
  real<lower=0> a;                  // gamma shape
  real<lower=0> b;                  // gamma rate
  int<lower=2> K;
  array[K] int<lower=0> counts;     // multinomial counts
  vector<lower=0>[K] alpha;         // Dirichlet concentration
}
parameters {
  real<lower=0> lambda;
  simplex[K] theta;
}
model {
  lambda ~ gamma(a, b);
  y ~ poisson(lambda);
  theta ~ dirichlet(alpha);
  counts ~ multinomial(theta);
}
