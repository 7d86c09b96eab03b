// Right censoring by imputing censored values as bounded parameters (vectorised lower bound).
data {
  int<lower=0> N_obs;
  int<lower=0> N_cens;
  vector[N_obs] y_obs;
  vector[N_cens] c;
}
parameters {
  real mu;
  real<lower=0> sigma;
  vector<lower=c>[N_cens] y_cens;
}
model {
  mu ~ normal(0, 10);
  sigma ~ exponential(0.5);
  y_obs ~ normal(mu, sigma);
  y_cens ~ normal(mu, sigma);
}
