// Independent binomial groups with bounded success probabilities and a common
// beta prior. The evidence is analytic (see README.md in this folder).
data {
  int<lower=1> J;
  array[J] int<lower=0> n;
  array[J] int<lower=0> k;
  real<lower=0> a;
  real<lower=0> b;
}
parameters {
  vector<lower=0, upper=1>[J] theta;
}
model {
  theta ~ beta(a, b);
  k ~ binomial(n, theta);
}
