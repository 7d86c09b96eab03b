// map_rect over shards of a linear regression.
functions {
  vector shard_ll(vector phi, vector theta, data array[] real x_r, data array[] int x_i) {
    int n = x_i[1];
    vector[n] y = to_vector(x_r[1:n]);
    vector[n] x = to_vector(x_r[(n + 1):(2 * n)]);
    return [normal_lpdf(y | phi[1] + theta[1] * x, phi[2])]';
  }
}
data {
  int<lower=1> S;
  int<lower=1> n;
  array[S, 2 * n] real xr;
}
transformed data {
  array[S, 1] int xi;
  for (s in 1:S) xi[s, 1] = n;
}
parameters {
  real alpha;
  real<lower=0> sigma;
  array[S] vector[1] beta;
}
model {
  alpha ~ normal(0, 1);
  sigma ~ exponential(1);
  for (s in 1:S) beta[s] ~ normal(0, 1);
  target += sum(map_rect(shard_ll, [alpha, sigma]', beta, xr, xi));
}
