// Counts whose rate changes at an unknown continuous time s (no prior statement: flat on
// (0, T)); the model uses s only in a comparison.
data {
  int<lower=1> T;
  array[T] int<lower=0> y;
}
parameters {
  real<lower=0> early;
  real<lower=0> late;
  real<lower=0, upper=T> s;
}
model {
  vector[T] rate;
  early ~ gamma(2, 1);
  late ~ gamma(2, 1);
  for (t in 1:T)
    rate[t] = t < s ? early : late;
  y ~ poisson(rate);
}
