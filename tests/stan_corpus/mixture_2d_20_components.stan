// The 20-component 2-D Gaussian mixture benchmark (Liang & Wong style):
// equal weights, isotropic sd 0.1 around 20 fixed means in [0,10]^2; target += only.
data {
  int<lower=1> K;
  array[K] vector[2] mu;
  real<lower=0> sigma;
}
parameters {
  vector[2] x;
}
model {
  vector[K] lps;
  for (k in 1:K) {
    lps[k] = -log(K) + normal_lpdf(x | mu[k], sigma);
  }
  target += log_sum_exp(lps);
}
