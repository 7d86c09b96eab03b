// Two-parameter logistic item response model with positive discriminations (long format).
data {
  int<lower=1> I;
  int<lower=1> J;
  int<lower=1> N;
  array[N] int<lower=1, upper=I> ii;
  array[N] int<lower=1, upper=J> jj;
  array[N] int<lower=0, upper=1> y;
}
parameters {
  vector<lower=0>[I] a;
  vector[I] b;
  vector[J] theta;
  real<lower=0> sigma_b;
}
model {
  a ~ lognormal(0, 0.5);
  sigma_b ~ exponential(1);
  b ~ normal(0, sigma_b);
  theta ~ std_normal();
  y ~ bernoulli_logit(a[ii] .* (theta[jj] - b[ii]));
}
