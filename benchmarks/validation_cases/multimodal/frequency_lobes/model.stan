// A sinusoid of unknown frequency in noise: y[t] = a cos(omega t) + b sin(omega t) + noise.
// The data are weak, so omega has a main peak, side lobes and a low-frequency mode.
data {
  int<lower=1> T;
  vector[T] y;
  real<lower=0> sigma;
}
transformed data {
  vector[T] t = linspaced_vector(T, 0, T - 1);
}
parameters {
  real<lower=0, upper=pi()> omega;
  real a;
  real b;
}
model {
  a ~ normal(0, 2);
  b ~ normal(0, 2);
  y ~ normal(a * cos(omega * t) + b * sin(omega * t), sigma);
}
