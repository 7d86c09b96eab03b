// Censoring and truncation: observed values truncated to [L, U] via T[L,U]; right-censored
// values contribute normal_lccdf; left-censored ones normal_lcdf.
data {
  int<lower=0> N_obs;
  int<lower=0> N_rcens;
  int<lower=0> N_lcens;
  real L;
  real<lower=L> U;
  array[N_obs] real<lower=L, upper=U> y_obs;
  real<lower=L, upper=U> C_right;
  real<lower=L, upper=U> C_left;
}
parameters {
  real mu;
  real<lower=0> sigma;
}
model {
  mu ~ normal(0, 10);
  sigma ~ normal(0, 5);
  for (n in 1:N_obs) {
    y_obs[n] ~ normal(mu, sigma) T[L, U];
  }
  target += N_rcens * normal_lccdf(C_right | mu, sigma);
  target += N_lcens * normal_lcdf(C_left | mu, sigma);
}
