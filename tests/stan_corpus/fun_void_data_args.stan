// Void functions, data-only arguments, unsized array arguments, and print.
functions {
  void report(data array[] real xs, real total) {
    print("n = ", size(xs), ", total = ", total);
  }
  real weighted_sum(data vector w, vector x) {
    return dot_product(w, x);
  }
  void check_positive(real x) {
    if (x <= 0) reject("expected positive, got ", x);
  }
  matrix outer(data row_vector a, vector b) {
    return b * a;
  }
  void nothing() {
    return;
  }
}
data {
  int<lower=1> N;
  vector[N] w;
  array[N] real xs;
}
transformed data {
  report(xs, sum(xs));
  nothing();
}
parameters {
  vector[N] x;
}
model {
  x ~ normal(0, 1);
  target += -0.5 * square(weighted_sum(w, x));
}
generated quantities {
  matrix[N, N] o = outer(w', x);
  check_positive(1 + dot_self(x));
}
