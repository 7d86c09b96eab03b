// integrate_1d with finite and infinite limits.
functions {
  real integrand(real x, real xc, array[] real theta, array[] real x_r, array[] int x_i) {
    return exp(-theta[1] * square(x));
  }
}
transformed data {
  array[0] real x_r;
  array[0] int x_i;
}
parameters {
  real<lower=0.1, upper=10> a;
}
transformed parameters {
  real Z = integrate_1d(integrand, negative_infinity(), positive_infinity(), {a}, x_r, x_i);
  real Zfin = integrate_1d(integrand, 0, 1, {a}, x_r, x_i, 1e-8);
}
model {
  a ~ lognormal(0, 0.5);
  target += -log(Z);
}
