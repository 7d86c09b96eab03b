// SIR epidemic model solved with ode_rk45; negative-binomial observation of infected counts.
functions {
  vector sir(real t, vector y, real beta, real gamma, int N) {
    vector[3] dydt;
    real S = y[1];
    real I = y[2];
    real R = y[3];
    real infection = beta * I * S / N;
    real recovery = gamma * I;
    dydt[1] = -infection;
    dydt[2] = infection - recovery;
    dydt[3] = recovery;
    return dydt;
  }
}
data {
  int<lower=1> n_days;
  real t0;
  array[n_days] real ts;
  int<lower=1> N;
  array[n_days] int<lower=0> cases;
}
transformed data {
  vector[3] y0 = [N - 1.0, 1.0, 0.0]';
}
parameters {
  real<lower=0> gamma;
  real<lower=0> beta;
  real<lower=0> phi_inv;
}
transformed parameters {
  array[n_days] vector[3] y = ode_rk45(sir, y0, t0, ts, beta, gamma, N);
  real phi = 1. / phi_inv;
}
model {
  beta ~ normal(2, 1);
  gamma ~ normal(0.4, 0.5);
  phi_inv ~ exponential(5);
  for (t in 1:n_days) {
    cases[t] ~ neg_binomial_2(fmax(y[t, 2], 1e-6), phi);
  }
}
generated quantities {
  real R0 = beta / gamma;
}
