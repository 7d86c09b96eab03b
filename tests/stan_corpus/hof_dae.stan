// Differential-algebraic equation solver (dae, dae_tol).
functions {
  vector chem(real t, vector yy, vector yp, real k) {
    vector[2] res;
    res[1] = yp[1] + k * yy[1];
    res[2] = yy[1] + yy[2] - 1;
    return res;
  }
}
transformed data {
  vector[2] yy0 = [1, 0]';
  vector[2] yp0 = [-0.5, 0.5]';
  array[3] real ts = {0.5, 1.0, 2.0};
}
parameters {
  real<lower=0> k;
}
transformed parameters {
  array[3] vector[2] sol = dae(chem, yy0, yp0, 0, ts, k);
  array[3] vector[2] sol2 = dae_tol(chem, yy0, yp0, 0, ts, 1e-6, 1e-6, 1000, k);
}
model {
  k ~ lognormal(log(0.5), 0.2);
}
