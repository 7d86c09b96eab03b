// Bayesian linear regression with known noise sd and independent normal priors
// on the coefficients. The evidence is analytic (see README.md in this folder):
// y ~ MVN(0, sigma^2 I + tau^2 X X').
data {
  int<lower=0> N;
  int<lower=1> K;
  matrix[N, K] X;
  vector[N] y;
  real<lower=0> sigma;  // known noise sd
  real<lower=0> tau;    // prior sd of each coefficient
}
parameters {
  vector[K] beta;
}
model {
  beta ~ normal(0, tau);
  y ~ normal(X * beta, sigma);
}
