// AR(1) time series with stationarity constraint on the coefficient; vectorised slices.
data {
  int<lower=2> N;
  vector[N] y;
}
parameters {
  real alpha;
  real<lower=-1, upper=1> beta;
  real<lower=0> sigma;
}
model {
  alpha ~ normal(0, 5);
  beta ~ uniform(-1, 1);
  sigma ~ normal(0, 2);
  y[1] ~ normal(alpha / (1 - beta), sigma / sqrt(1 - beta ^ 2));
  y[2:N] ~ normal(alpha + beta * y[1:(N - 1)], sigma);
}
