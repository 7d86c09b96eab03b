// Two-component mixture with log_mix (scalar and vectorised forms); target += only.
data {
  int<lower=1> N;
  vector[N] y;
}
parameters {
  real<lower=0, upper=1> lambda;
  ordered[2] mu;
  array[2] real<lower=0> sigma;
  simplex[3] w3;
  vector[3] m3;
}
model {
  target += normal_lpdf(mu | 0, 10);
  target += lognormal_lpdf(sigma | 0, 1);
  target += beta_lpdf(lambda | 2, 2);
  target += normal_lpdf(m3 | 0, 5);
  target += dirichlet_lpdf(w3 | rep_vector(2, 3));
  for (n in 1:N) {
    target += log_mix(lambda,
                      normal_lpdf(y[n] | mu[1], sigma[1]),
                      normal_lpdf(y[n] | mu[2], sigma[2]));
  }
  // vectorised log_mix over K = 3 components for a single observation
  target += log_mix(w3, [normal_lpdf(y[1] | m3[1], 1),
                         normal_lpdf(y[1] | m3[2], 1),
                         normal_lpdf(y[1] | m3[3], 1)]');
}
