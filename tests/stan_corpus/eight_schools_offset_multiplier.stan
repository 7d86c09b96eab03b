// Eight schools, non-centred via affine (offset/multiplier) transform; target += only.
data {
  int<lower=0> J;
  vector[J] y;
  vector<lower=0>[J] sigma;
}
parameters {
  real mu;
  real<lower=0> tau;
  vector<offset=mu, multiplier=tau>[J] theta;
}
model {
  target += normal_lpdf(mu | 0, 5);
  target += cauchy_lpdf(tau | 0, 5);
  target += normal_lpdf(theta | mu, tau);
  target += normal_lpdf(y | theta, sigma);
}
