// target() read inside model block and inside an _lp function.
functions {
  real peek_lp() {
    return target();
  }
}
parameters {
  real x;
  real<lower=0> y;
}
model {
  real before = target();
  target += normal_lpdf(x | 0, 1);
  real mid = peek_lp();
  target += exponential_lpdf(y | 2);
  if (target() - mid > 1e10) reject("unreachable");
  print("before=", before, " mid=", mid, " end=", target());
}
