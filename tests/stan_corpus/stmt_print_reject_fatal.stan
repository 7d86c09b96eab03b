// print, reject and fatal_error with strings (incl. punctuation and a backslash) and expressions.
functions {
  real safe_log(real x) {
    if (x <= 0) reject("safe_log: x must be positive, got ", x);
    return log(x);
  }
  void must_hold(int cond, data array[] int info) {
    if (!cond) fatal_error("invariant violated: ", info);
  }
}
data {
  int<lower=0> N;
}
transformed data {
  must_hold(N >= 0, {N});
  print("N = ", N, "; a string with 'single quotes', symbols !@#$%^&*()[]{}<>~ and backslashes \\ ");
  print("vector: ", [1, 2, 3], " matrix: ", [[1, 2], [3, 4]], " complex: ", 1 + 2i);
}
parameters {
  real<lower=0> s;
}
model {
  if (is_nan(s)) reject("s is nan");
  s ~ exponential(1);
  print("target = ", target(), ", s = ", s);
}
generated quantities {
  real ls = safe_log(s);
}
