// Truncation of container variates (stanc 2.35: bounds against min/max, the
// normaliser counted once per element when the distribution arguments are scalars).
data {
  int<lower=1> N;
  vector<lower=0, upper=10>[N] y;
  real L;
}
parameters {
  vector<lower=0>[3] lambda;
  real mu;
  real<lower=0> sigma;
  array[2] real<lower=L> z;
}
model {
  lambda ~ student_t(3, 0, 1) T[0, ];
  mu ~ normal(5, 5);
  sigma ~ normal(0, 3) T[0, ];
  y ~ normal(mu, sigma) T[0, 10];
  y[2:4] ~ normal(mu, sigma) T[, 12];
  z ~ normal(mu, 2) T[L, ];
}
