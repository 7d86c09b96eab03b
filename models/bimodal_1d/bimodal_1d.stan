// One-dimensional two-component Gaussian mixture with well-separated modes.
// Exact: P(x < 0) = w (up to 1e-20), E[x] = w * mu1 + (1 - w) * mu2.
data {
  real<lower=0, upper=1> w;  // mass of the left mode
  real mu1;
  real mu2;
  real<lower=0> sigma;
}
parameters {
  real x;
}
model {
  target += log_mix(w, normal_lpdf(x | mu1, sigma), normal_lpdf(x | mu2, sigma));
}
