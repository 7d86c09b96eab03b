// Arrays of constrained types.
data {
  int<lower=1> K;
}
parameters {
  array[2] simplex[K] theta;
  array[2] ordered[K] cuts;
  array[2, 2] real<lower=0> sig;
  array[2] cholesky_factor_corr[K] L;
  array[2] cov_matrix[2] S;
  array[2] unit_vector[K] u;
  array[2] positive_ordered[2] po;
  array[2] corr_matrix[2] R;
  array[2] cholesky_factor_cov[3, 2] Lc;
}
model {
  for (i in 1:2) {
    theta[i] ~ dirichlet(rep_vector(1.5, K));
    cuts[i] ~ normal(0, 2);
    sig[i] ~ exponential(1);
    L[i] ~ lkj_corr_cholesky(3);
    S[i] ~ inv_wishart(4, identity_matrix(2));
    po[i] ~ gamma(2, 1);
    R[i] ~ lkj_corr(1.5);
    to_vector(Lc[i]) ~ normal(0, 2);
  }
}
