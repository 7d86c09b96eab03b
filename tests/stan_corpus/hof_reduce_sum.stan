// reduce_sum and reduce_sum_static with a partial-sum _lpmf and _lpdf function.
functions {
  real partial_bernoulli_lpmf(array[] int y_slice, int start, int end,
                              vector x, real alpha, real beta) {
    return bernoulli_logit_lpmf(y_slice | alpha + beta * x[start:end]);
  }
  real partial_normal_lpdf(array[] real z_slice, int start, int end, real mu) {
    return normal_lpdf(z_slice | mu, 1);
  }
}
data {
  int<lower=1> N;
  array[N] int<lower=0, upper=1> y;
  vector[N] x;
  array[N] real z;
  int<lower=1> grainsize;
}
parameters {
  real alpha;
  real beta;
  real mu;
}
model {
  alpha ~ normal(0, 2);
  beta ~ normal(0, 2);
  mu ~ normal(0, 5);
  target += reduce_sum(partial_bernoulli_lpmf, y, grainsize, x, alpha, beta);
  target += reduce_sum_static(partial_normal_lpdf, z, grainsize, mu);
}
