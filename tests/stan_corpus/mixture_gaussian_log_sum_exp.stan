// Finite Gaussian mixture (K components) marginalised with log_sum_exp; ordered means.
data {
  int<lower=1> K;
  int<lower=1> N;
  array[N] real y;
}
parameters {
  simplex[K] theta;
  ordered[K] mu;
  vector<lower=0>[K] sigma;
}
model {
  vector[K] log_theta = log(theta);
  sigma ~ lognormal(0, 2);
  mu ~ normal(0, 10);
  for (n in 1:N) {
    vector[K] lps = log_theta;
    for (k in 1:K) {
      lps[k] += normal_lpdf(y[n] | mu[k], sigma[k]);
    }
    target += log_sum_exp(lps);
  }
}
