// offset/multiplier with scalars, vectors, and parameter-dependent values (non-centred).
// The vector multiplier is a transformed-data vector on purpose: written inline as
// `multiplier=rep_vector(2, J)`, stanc 2.35's C++ keeps a reference to a destroyed
// temporary and the draws of phi come out as garbage (undefined behaviour).
data {
  int<lower=1> J;
  vector[J] m0;
}
transformed data {
  vector[J] phi_scale = rep_vector(2, J);
}
parameters {
  real mu;
  real<lower=0> tau;
  real<offset=mu> a;
  real<multiplier=tau> b;
  vector<offset=mu, multiplier=tau>[J] theta;
  vector<offset=m0, multiplier=phi_scale>[J] phi;
  array[2] real<offset=1, multiplier=3> arr;
}
model {
  mu ~ normal(0, 5);
  tau ~ lognormal(0, 1);
  a ~ normal(mu, 1);
  b ~ normal(0, tau);
  theta ~ normal(mu, tau);
  phi ~ normal(m0, 2);
  arr ~ normal(1, 3);
}
