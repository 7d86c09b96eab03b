// Constrained parameters with an empty model block: the log density is the sum of the
// change-of-variables Jacobian terms only (proper because every parameter is bounded/compact).
parameters {
  real<lower=0, upper=1> p;
  simplex[3] s;
  vector<lower=-1, upper=2>[2] v;
  cholesky_factor_corr[2] L;
}
model {
}
