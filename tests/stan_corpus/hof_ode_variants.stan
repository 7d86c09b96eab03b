// All ODE solver interfaces: ode_rk45, ode_bdf, ode_adams, ode_ckrk and their _tol variants,
// plus ode_adjoint_tol_ctl; with variadic arguments of several types.
functions {
  vector decay(real t, vector y, real k, vector w, array[] int flags) {
    vector[2] dydt;
    dydt[1] = -k * y[1];
    dydt[2] = k * y[1] - w[1] * y[2] + flags[1] * 0;
    return dydt;
  }
}
data {
  int<lower=1> T;
  array[T] real ts;
}
transformed data {
  vector[2] y0 = [1, 0]';
  vector[1] w = [0.5]';
  array[1] int flags = {1};
}
parameters {
  real<lower=0> k;
}
transformed parameters {
  array[T] vector[2] s1 = ode_rk45(decay, y0, 0, ts, k, w, flags);
  array[T] vector[2] s2 = ode_bdf(decay, y0, 0, ts, k, w, flags);
  array[T] vector[2] s3 = ode_adams(decay, y0, 0, ts, k, w, flags);
  array[T] vector[2] s4 = ode_ckrk(decay, y0, 0, ts, k, w, flags);
  array[T] vector[2] s5 = ode_rk45_tol(decay, y0, 0, ts, 1e-6, 1e-6, 1000, k, w, flags);
  array[T] vector[2] s6 = ode_bdf_tol(decay, y0, 0, ts, 1e-6, 1e-6, 1000, k, w, flags);
  array[T] vector[2] s7 = ode_adams_tol(decay, y0, 0, ts, 1e-6, 1e-6, 1000, k, w, flags);
  array[T] vector[2] s8 = ode_ckrk_tol(decay, y0, 0, ts, 1e-6, 1e-6, 1000, k, w, flags);
  array[T] vector[2] s9 = ode_adjoint_tol_ctl(decay, y0, 0, ts,
      1e-6, rep_vector(1e-6, 2), 1e-6, rep_vector(1e-6, 2), 1e-6, 1e-6, 1000, 150, 1, 2, 2, k, w, flags);
}
model {
  k ~ lognormal(0, 1);
}
