// Uses all seven program blocks.
functions {
  real scaled_sq(real x, real s) {
    return square(x / s);
  }
}
data {
  int<lower=0> N;
  vector[N] y;
}
transformed data {
  real y_mean = mean(y);
  real y_sd = sd(y);
}
parameters {
  real mu;
  real<lower=0> sigma;
}
transformed parameters {
  real z = (mu - y_mean) / y_sd;
}
model {
  mu ~ normal(0, 10);
  sigma ~ exponential(1);
  y ~ normal(mu, sigma);
}
generated quantities {
  real pen = scaled_sq(mu, sigma);
  real y_rep = normal_rng(mu, sigma);
}
