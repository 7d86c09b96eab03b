// Assignment and every compound assignment operator on scalars and containers.
data {
  int<lower=1> N;
  vector[N] x;
}
transformed data {
  int i = 10;
  i += 2;
  i -= 1;
  i *= 3;
  i /= 2;
  real r = 1.5;
  r += 1;
  r -= 0.25;
  r *= 2;
  r /= 4;
  vector[N] v = x;
  v += 1;
  v -= x;
  v *= 2.0;
  v /= 3;
  v .*= x;
  v ./= (x + 10);
  matrix[2, 2] M = [[1, 2], [3, 4]];
  M *= M;
  M .*= M;
  M ./= [[1, 2], [3, 4]];
  M += 1;
  row_vector[2] rv = [1, 2];
  rv *= M;
  complex z = 1 + 2i;
  z *= 2i;
  z += 1;
}
parameters {
  real mu;
}
model {
  real lp = 0;
  lp += normal_lpdf(mu | r, 1);
  lp -= 0.0;
  vector[N] resid = x;
  resid -= mu;
  resid ./= 2;
  target += lp - 0.5 * dot_self(resid);
}
