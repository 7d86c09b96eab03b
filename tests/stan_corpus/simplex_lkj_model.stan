// Mixture of multivariate normals sharing a correlation: simplex weights + cholesky_factor_corr (LKJ).
data {
  int<lower=1> N;
  int<lower=1> D;
  int<lower=1> K;
  array[N] vector[D] y;
}
parameters {
  simplex[K] w;
  array[K] vector[D] mu;
  cholesky_factor_corr[D] L_Omega;
  vector<lower=0>[D] tau;
}
transformed parameters {
  matrix[D, D] L_Sigma = diag_pre_multiply(tau, L_Omega);
}
model {
  L_Omega ~ lkj_corr_cholesky(2);
  tau ~ cauchy(0, 2.5);
  w ~ dirichlet(rep_vector(2, K));
  for (k in 1:K) mu[k] ~ normal(0, 5);
  for (n in 1:N) {
    vector[K] lps = log(w);
    for (k in 1:K) lps[k] += multi_normal_cholesky_lpdf(y[n] | mu[k], L_Sigma);
    target += log_sum_exp(lps);
  }
}
generated quantities {
  matrix[D, D] Omega = multiply_lower_tri_self_transpose(L_Omega);
}
