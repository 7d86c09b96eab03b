// Circular data: mean direction parameterised by a unit_vector; von_mises likelihood.
data {
  int<lower=0> N;
  array[N] real<lower=-pi(), upper=pi()> theta;
}
parameters {
  unit_vector[2] u;
  real<lower=0> kappa;
}
transformed parameters {
  real mu = atan2(u[2], u[1]);
}
model {
  kappa ~ gamma(2, 0.5);
  theta ~ von_mises(mu, kappa);
}
