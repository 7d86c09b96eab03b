// Linear regression with unknown noise; uses normal_id_glm, posterior predictive.
data {
  int<lower=0> N;
  int<lower=1> K;
  matrix[N, K] X;
  vector[N] y;
}
parameters {
  real alpha;
  vector[K] beta;
  real<lower=0> sigma;
}
model {
  alpha ~ normal(0, 10);
  beta ~ normal(0, 5);
  sigma ~ student_t(3, 0, 2);
  y ~ normal_id_glm(X, alpha, beta, sigma);
}
generated quantities {
  vector[N] mu = alpha + X * beta;
  array[N] real y_rep = normal_rng(mu, sigma);
}
