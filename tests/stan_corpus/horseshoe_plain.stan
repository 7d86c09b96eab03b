// Sparse regression with the original horseshoe prior (half-Cauchy local and global scales),
// written with target += only.
data {
  int<lower=0> N;
  int<lower=1> D;
  matrix[N, D] X;
  vector[N] y;
}
parameters {
  real beta0;
  real<lower=0> sigma;
  vector[D] z;
  real<lower=0> tau;
  vector<lower=0>[D] lambda;
}
transformed parameters {
  vector[D] beta = z .* lambda * tau;
}
model {
  target += std_normal_lpdf(z);
  target += cauchy_lpdf(lambda | 0, 1) - D * cauchy_lccdf(0 | 0, 1);
  target += cauchy_lpdf(tau | 0, 1) - cauchy_lccdf(0 | 0, 1);
  target += normal_lpdf(beta0 | 0, 5);
  target += exponential_lpdf(sigma | 1);
  target += normal_lpdf(y | beta0 + X * beta, sigma);
}
