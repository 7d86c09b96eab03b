// Lotka-Volterra predator-prey model with ode_rk45_tol and lognormal measurement error.
functions {
  vector dz_dt(real t, vector z, real alpha, real beta, real gamma, real delta) {
    real u = z[1];
    real v = z[2];
    vector[2] dz;
    dz[1] = (alpha - beta * v) * u;
    dz[2] = (-gamma + delta * u) * v;
    return dz;
  }
}
data {
  int<lower=0> N;
  array[N] real ts;
  vector<lower=0>[2] y_init;
  array[N] vector<lower=0>[2] y;
}
parameters {
  real<lower=0, upper=3> alpha;
  real<lower=0, upper=0.5> beta;
  real<lower=0, upper=3> gamma;
  real<lower=0, upper=0.5> delta;
  vector<lower=0>[2] z_init;
  vector<lower=0>[2] sigma;
}
transformed parameters {
  array[N] vector[2] z = ode_rk45_tol(dz_dt, z_init, 0, ts, 1e-5, 1e-3, 100000,
                                     alpha, beta, gamma, delta);
}
model {
  alpha ~ normal(1, 0.5);
  gamma ~ normal(1, 0.5);
  beta ~ normal(0.05, 0.05);
  delta ~ normal(0.05, 0.05);
  sigma ~ lognormal(-1, 1);
  z_init ~ lognormal(log(10), 1);
  y_init ~ lognormal(log(z_init), sigma);
  for (k in 1:2) {
    y[:, k] ~ lognormal(log(z[:, k]), sigma[k]);
  }
}
