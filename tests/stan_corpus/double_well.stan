// Double-well potential U(x) = h (x^2 - 1)^2 in 1-D plus a 2-D coupled variant; target += only.
data {
  real<lower=0> h;
  real<lower=0> temp;
}
parameters {
  real x;
  vector[2] q;
}
model {
  target += -h * square(square(x) - 1) / temp;
  target += -(h * (q[1] ^ 2 - 1) ^ 2 + 0.5 * (q[2] - q[1]) ^ 2) / temp;
}
