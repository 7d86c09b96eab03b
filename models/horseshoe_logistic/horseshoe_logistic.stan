// Sparse logistic regression with the regularised horseshoe prior
// (Piironen & Vehtari 2017, non-centred parameterisation), the model of section 4.3
// of the pseudo-extended MCMC paper (Nemeth et al. 2019), on synthetic data from
// generate_data.py:
//
//   beta_j = z_j * tau * lambda_tilde_j,   z_j ~ N(0, 1),
//   lambda_j ~ half-t(nu_local, 0, 1),     tau ~ half-t(nu_global, 0, scale_global),
//   lambda_tilde_j^2 = c^2 lambda_j^2 / (c^2 + tau^2 lambda_j^2),
//   c^2 ~ inv_gamma(slab_df / 2, slab_df * slab_scale^2 / 2)   (c = slab_scale * sqrt(caux)),
//   beta0 ~ N(0, scale_icept^2),   y_i ~ Bernoulli(inv_logit(beta0 + X_i beta)).
//
// The half-t priors are written with truncation T[0, ] so that the density keeps its
// normalising constants (each half-t is twice the t density on (0, inf)).
data {
  int<lower=0> N;                          // training observations
  int<lower=1> D;                          // predictors
  matrix[N, D] X;                          // standardised predictors
  array[N] int<lower=0, upper=1> y;
  int<lower=0> N_test;                     // held-out observations
  matrix[N_test, D] X_test;
  array[N_test] int<lower=0, upper=1> y_test;
  real<lower=0> scale_icept;               // prior sd of the intercept
  real<lower=0> scale_global;              // tau0 = p0 / (D - p0) * 2 / sqrt(N)
  real<lower=1> nu_global;                 // 1: half-Cauchy on tau
  real<lower=1> nu_local;                  // 1: half-Cauchy on the lambdas
  real<lower=0> slab_scale;                // s: prior scale of the large coefficients
  real<lower=0> slab_df;                   // nu: slab degrees of freedom
}
parameters {
  real beta0;
  vector[D] z;
  real<lower=0> tau;
  vector<lower=0>[D] lambda;
  real<lower=0> caux;
}
transformed parameters {
  real<lower=0> c = slab_scale * sqrt(caux);
  vector<lower=0>[D] lambda_tilde = sqrt(c ^ 2 * square(lambda)
                                         ./ (c ^ 2 + tau ^ 2 * square(lambda)));
  vector[D] beta = z .* lambda_tilde * tau;
}
model {
  z ~ std_normal();
  for (j in 1:D) {
    lambda[j] ~ student_t(nu_local, 0, 1) T[0, ];
  }
  tau ~ student_t(nu_global, 0, scale_global) T[0, ];
  caux ~ inv_gamma(0.5 * slab_df, 0.5 * slab_df);
  beta0 ~ normal(0, scale_icept);
  y ~ bernoulli_logit(beta0 + X * beta);
}
generated quantities {
  // pointwise log predictive density of the held-out data (PE paper, figure 5)
  vector[N_test] log_lik_test;
  for (i in 1:N_test) {
    log_lik_test[i] = bernoulli_logit_lpmf(y_test[i] | beta0 + X_test[i] * beta);
  }
}
