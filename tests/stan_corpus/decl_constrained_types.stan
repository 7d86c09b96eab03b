// Every constrained parameter type accepted by stanc 2.35.
// (sum_to_zero_vector and column/row_stochastic_matrix are 2.36+, not included.)
parameters {
  real<lower=0> a;
  real<upper=0> b;
  real<lower=-1, upper=1> c;
  real<offset=1, multiplier=2> d;
  vector<lower=0>[3] e;
  row_vector<upper=5>[2] f;
  matrix<lower=0, upper=1>[2, 2] g;
  ordered[3] h;
  positive_ordered[3] i;
  simplex[4] j;
  unit_vector[3] k;
  cholesky_factor_corr[3] l;
  cholesky_factor_cov[3] m;
  cholesky_factor_cov[4, 3] m2;
  corr_matrix[3] n;
  cov_matrix[3] o;
}
model {
  a ~ exponential(1);
  b ~ normal(0, 1);
  d ~ normal(1, 2);
  e ~ exponential(1);
  f ~ normal(0, 3);
  h ~ normal(0, 3);
  i ~ exponential(0.5);
  j ~ dirichlet(rep_vector(2, 4));
  l ~ lkj_corr_cholesky(2);
  to_vector(m) ~ normal(0, 1);
  to_vector(m2) ~ normal(0, 1);
  n ~ lkj_corr(2);
  o ~ wishart(5, diag_matrix(rep_vector(1, 3)));
}
