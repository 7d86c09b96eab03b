// A hierarchical normal model whose population mean has a bimodal prior: the eight groups'
// data weigh the two signs of mu unequally, and the posterior has two touching modes.
data {
  int<lower=1> J;
  vector[J] y;
  vector<lower=0>[J] sigma;
  real<lower=0> tau;
}
parameters {
  real mu;
  vector[J] theta;
}
model {
  target += log_mix(0.5, normal_lpdf(mu | -2, 0.7), normal_lpdf(mu | 2, 0.7));
  theta ~ normal(mu, tau);
  y ~ normal(theta, sigma);
}
