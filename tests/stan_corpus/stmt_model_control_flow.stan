// Control flow inside the model block that depends on data and parameters:
// while, foreach over a vector and a matrix, if/else if/else, break/continue; target += only.
data {
  int<lower=1> N;
  vector[N] y;
  matrix[2, 2] W;
}
parameters {
  real mu;
  real<lower=0> sigma;
}
model {
  int n = 1;
  target += normal_lpdf(mu | 0, 10) + exponential_lpdf(sigma | 1);
  while (n <= N) {
    if (y[n] > 100) {
      n += 1;
      continue;
    } else if (y[n] < -100) {
      break;
    } else {
      target += normal_lpdf(y[n] | mu, sigma);
    }
    n += 1;
  }
  for (v in y) {
    if (v == 0) continue;
    target += -1e-3 * square(v - mu);
  }
  for (w in W) target += -0.5 * square(w * mu);
  target += mu > 0 ? -mu : mu;
}
