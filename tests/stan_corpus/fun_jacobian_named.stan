// stanc 2.35 has no special `_jacobian` suffix or `jacobian +=` statement
// (introduced in 2.36); a function named *_jacobian is an ordinary function.
// Jacobian adjustment written manually with target +=.
functions {
  real exp_transform_jacobian(real x) {
    return exp(x);
  }
}
parameters {
  real log_s;
}
transformed parameters {
  real<lower=0> s = exp_transform_jacobian(log_s);
}
model {
  target += log_s;            // log |d s / d log_s|
  target += gamma_lpdf(s | 2, 1);
}
