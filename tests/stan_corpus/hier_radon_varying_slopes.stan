// Radon-style varying intercepts and slopes with LKJ prior on the correlation
// (non-centred, cholesky_factor_corr + scale vector).
data {
  int<lower=1> N;
  int<lower=1> J;
  array[N] int<lower=1, upper=J> county;
  vector[N] x;
  vector[N] y;
}
parameters {
  vector[2] mu_ab;
  vector<lower=0>[2] tau;
  cholesky_factor_corr[2] L_Omega;
  matrix[2, J] z;
  real<lower=0> sigma_y;
}
transformed parameters {
  matrix[J, 2] ab = rep_matrix(mu_ab', J) + (diag_pre_multiply(tau, L_Omega) * z)';
}
model {
  vector[N] mu;
  mu_ab ~ normal(0, 10);
  tau ~ normal(0, 2.5);
  L_Omega ~ lkj_corr_cholesky(2);
  to_vector(z) ~ std_normal();
  sigma_y ~ normal(0, 5);
  for (n in 1:N) {
    mu[n] = ab[county[n], 1] + ab[county[n], 2] * x[n];
  }
  y ~ normal(mu, sigma_y);
}
generated quantities {
  corr_matrix[2] Omega = multiply_lower_tri_self_transpose(L_Omega);
}
