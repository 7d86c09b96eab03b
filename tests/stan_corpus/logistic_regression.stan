// Logistic regression with bernoulli_logit and a GLM variant in generated quantities.
data {
  int<lower=0> N;
  int<lower=1> K;
  matrix[N, K] X;
  array[N] int<lower=0, upper=1> y;
}
parameters {
  real alpha;
  vector[K] beta;
}
model {
  alpha ~ normal(0, 2.5);
  beta ~ normal(0, 1);
  y ~ bernoulli_logit(alpha + X * beta);
}
generated quantities {
  real ll = bernoulli_logit_glm_lpmf(y | X, alpha, beta);
  array[N] int y_rep = bernoulli_logit_rng(alpha + X * beta);
}
