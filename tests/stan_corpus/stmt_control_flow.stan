// if / else if / else chains, nested blocks, empty statements, returns in functions.
functions {
  real piecewise(real x) {
    if (x < -1) {
      return -1;
    } else if (x < 0) {
      return x;
    } else if (x < 1)
      return x ^ 2;
    else {
      return 1;
    }
  }
  int classify(int n) {
    int out;
    if (n < 0) out = -1; else if (n == 0) out = 0; else out = 1;
    return out;
  }
}
parameters {
  real x;
}
model {
  ;
  {
    real a = piecewise(x);
    {
      real b = a * 2;
      ;
      target += -0.5 * x ^ 2;
      if (b > 100) {
      } else {
        ;
      }
    }
  }
  if (x > 0) ; else ;
}
generated quantities {
  int c = classify(x > 0 ? 1 : -1);
  real p = piecewise(x);
}
