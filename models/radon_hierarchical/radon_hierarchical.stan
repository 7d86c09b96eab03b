// Hierarchical regression shaped like the radon model of section 7.3 / figure 3a of
// Graham & Storkey (2017) (data: Gelman & Hill 2006, ch. 12), on synthetic data from
// generate_data.py. Log radon y_i of house i in county c_i with two regressors x_i:
//
//   mu_alpha ~ N(0, prior_scale_mu^2),   sigma_alpha ~ half-Cauchy(0, prior_scale_sigma),
//   mu_beta  ~ N(0, prior_scale_mu^2),   sigma_beta  ~ half-Cauchy(0, prior_scale_sigma),
//   alpha_j ~ N(mu_alpha, sigma_alpha^2)   (j = 1..J county intercepts),
//   beta_k  ~ N(mu_beta, sigma_beta^2)     (k = 1, 2 regression coefficients),
//   epsilon ~ half-Cauchy(0, prior_scale_sigma),
//   y_i ~ N(alpha[c_i] + x_i beta, epsilon^2).
//
// Five scalar parameters, J = 85 intercepts and 2 coefficients: 92 parameters.
// Half-Cauchy priors are written with truncation T[0, ] so the density keeps its
// normalising constants (log Z is the marginal likelihood the CT paper estimates).
data {
  int<lower=1> N;                              // houses
  int<lower=1> J;                              // counties
  array[N] int<lower=1, upper=J> county;       // categorical regressor c_i
  matrix[N, 2] x;                              // floor (0 basement, 1 ground) and county log uranium
  vector[N] y;                                 // log radon
  real<lower=0> prior_scale_mu;
  real<lower=0> prior_scale_sigma;
}
parameters {
  real mu_alpha;
  real<lower=0> sigma_alpha;
  real mu_beta;
  real<lower=0> sigma_beta;
  real<lower=0> epsilon;
  vector[J] alpha;
  vector[2] beta;
}
model {
  mu_alpha ~ normal(0, prior_scale_mu);
  sigma_alpha ~ cauchy(0, prior_scale_sigma) T[0, ];
  mu_beta ~ normal(0, prior_scale_mu);
  sigma_beta ~ cauchy(0, prior_scale_sigma) T[0, ];
  epsilon ~ cauchy(0, prior_scale_sigma) T[0, ];
  alpha ~ normal(mu_alpha, sigma_alpha);
  beta ~ normal(mu_beta, sigma_beta);
  y ~ normal(alpha[county] + x * beta, epsilon);
}
