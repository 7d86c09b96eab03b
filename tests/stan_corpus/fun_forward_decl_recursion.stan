// Forward declarations, recursion and mutual recursion.
functions {
  int fib(int n);
  int is_even(int n);
  int is_odd(int n);

  int fib(int n) {
    if (n <= 1) {
      return n;
    }
    return fib(n - 1) + fib(n - 2);
  }
  int is_even(int n) {
    if (n == 0) return 1;
    return is_odd(n - 1);
  }
  int is_odd(int n) {
    if (n == 0) return 0;
    return is_even(n - 1);
  }
  real rpow(real x, int n) {
    if (n == 0) return 1.0;
    else return x * rpow(x, n - 1);
  }
}
data {
  int<lower=0, upper=20> n;
}
transformed data {
  int f = fib(n);
  int e = is_even(n);
}
parameters {
  real<lower=0> x;
}
model {
  x ~ gamma(f + 1, 1);
  target += -rpow(x, 2) * 1e-3;
}
generated quantities {
  int parity = is_odd(n);
}
