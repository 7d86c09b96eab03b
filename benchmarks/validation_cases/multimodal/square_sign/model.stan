// The data see theta only through its square; the prior prefers positive theta.
data {
  int<lower=1> n;
  vector[n] y;
}
parameters {
  real theta;
  real<lower=0> sigma;
}
model {
  theta ~ normal(0.5, 1);
  sigma ~ normal(0, 1);
  y ~ normal(square(theta), sigma);
}
