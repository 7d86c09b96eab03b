// Mixes ~ statements, target += of lpdf calls, _lupdf calls and raw log-density terms.
data {
  int<lower=0> N;
  vector[N] y;
  vector[N] x;
}
parameters {
  real alpha;
  real beta;
  real<lower=0> sigma;
  real<lower=1> nu;
}
model {
  alpha ~ normal(0, 10);
  target += normal_lupdf(beta | 0, 10);
  sigma ~ exponential(1);
  target += gamma_lpdf(nu | 2, 0.1);
  target += -0.001 * square(alpha);     // raw term
  y ~ student_t(nu, alpha + beta * x, sigma);
}
