// Conjugate beta-binomial model.
data {
  int<lower=0> G;
  array[G] int<lower=0> n;
  array[G] int<lower=0> k;
  real<lower=0> a;
  real<lower=0> b;
}
parameters {
  real<lower=0, upper=1> theta;
}
model {
  theta ~ beta(a, b);
  k ~ binomial(n, theta);
}
generated quantities {
  real post_mean = (a + sum(k)) / (a + b + sum(n));
}
