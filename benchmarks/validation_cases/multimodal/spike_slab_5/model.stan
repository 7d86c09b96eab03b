// Continuous spike-and-slab prior on five coefficients, 0.5 normal(0, 0.05) + 0.5 normal(0, 3),
// one observation y[k] ~ normal(beta[k], 1) each: a narrow and a wide mode on top of each other.
data {
  int<lower=1> K;
  vector[K] y;
}
parameters {
  vector[K] beta;
}
model {
  for (k in 1:K) {
    target += log_mix(0.5, normal_lpdf(beta[k] | 0, 0.05), normal_lpdf(beta[k] | 0, 3));
  }
  y ~ normal(beta, 1);
}
