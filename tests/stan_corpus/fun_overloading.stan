// Overloaded user functions (by argument type and arity).
functions {
  real twice(real x) { return 2 * x; }
  int twice(int x) { return 2 * x; }
  vector twice(vector x) { return 2 * x; }
  real twice(real x, real y) { return 2 * (x + y); }
  real shift_lpdf(real y, real mu) { return normal_lpdf(y | mu, 1); }
  real shift_lpdf(vector y, real mu) { return normal_lpdf(y | mu, 1); }
}
transformed data {
  int i2 = twice(3);
  real r2 = twice(1.5);
  vector[2] v2 = twice([1, 2]');
  real rr = twice(1.0, 2.0);
}
parameters {
  real mu;
  vector[2] z;
}
model {
  mu ~ shift(r2);
  z ~ shift(mu);
}
generated quantities {
  real t = twice(mu);
  vector[2] tz = twice(z);
}
