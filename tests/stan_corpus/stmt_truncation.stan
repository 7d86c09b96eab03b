// Truncation T[L,U], T[L,], T[,U] with built-in and parameter bounds.
data {
  int<lower=1> N;
  vector<lower=0, upper=10>[N] y;
  array[N] int<lower=1> cnt;
  real<upper=0> neg;
}
parameters {
  real mu;
  real<lower=0> sigma;
  real<lower=0> lambda;
  real<lower=max(y)> U;
}
model {
  mu ~ normal(5, 5);
  sigma ~ normal(0, 3) T[0, ];
  lambda ~ gamma(2, 0.5);
  for (n in 1:N) {
    y[n] ~ normal(mu, sigma) T[0, 10];
    y[n] ~ normal(mu, sigma) T[, U];
    cnt[n] ~ poisson(lambda) T[1, ];
  }
  neg ~ normal(mu, sigma) T[, 0];
  U ~ normal(10, 5) T[max(y), ];
}
