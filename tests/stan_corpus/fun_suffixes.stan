// User-defined _lpdf, _lpmf, _lcdf, _lccdf, _rng and _lp functions,
// used via ~, conditional notation, _lupdf/_lupmf, and truncation.
functions {
  real mylaplace_lpdf(real y, real mu, real b) {
    return -log(2 * b) - abs(y - mu) / b;
  }
  real mylaplace_lcdf(real y, real mu, real b) {
    if (y < mu) return log(0.5) + (y - mu) / b;
    return log1m(0.5 * exp(-(y - mu) / b));
  }
  real mylaplace_lccdf(real y, real mu, real b) {
    if (y < mu) return log1m(0.5 * exp((y - mu) / b));
    return log(0.5) - (y - mu) / b;
  }
  real mylaplace_rng(real mu, real b) {
    real u = uniform_rng(-0.5, 0.5);
    return mu - b * (u < 0 ? -1 : 1) * log1m(2 * abs(u));
  }
  real mypois_lpmf(int k, real lambda) {
    return k * log(lambda) - lambda - lgamma(k + 1);
  }
  real vec_normal_lpdf(vector y, vector mu, real s) {
    return normal_lpdf(y | mu, s);
  }
  void add_prior_lp(real x, real s) {
    x ~ normal(0, s);
  }
  real add_and_return_lp(real x) {
    target += -0.5 * x ^ 2;
    return target();
  }
}
data {
  int<lower=1> N;
  vector[N] y;
  array[N] int<lower=0> k;
}
parameters {
  real mu;
  real<lower=0> b;
  real<lower=0> lambda;
}
model {
  add_prior_lp(mu, 10);
  real tgt = add_and_return_lp(log(b));
  b ~ lognormal(0, 1);
  for (n in 1:N) {
    y[n] ~ mylaplace(mu, b) T[-10, 10];
    k[n] ~ mypois(lambda);
  }
  target += mylaplace_lupdf(0.0 | mu, 5);
  target += mypois_lupmf(3 | lambda);
  target += student_t_lupdf(mu | 3, 0, 10) + binomial_lupmf(3 | 10, inv_logit(mu));
  y ~ vec_normal(rep_vector(mu, N), 10);
  lambda ~ gamma(2, 0.5);
}
generated quantities {
  real yrep = mylaplace_rng(mu, b);
  real lc = mylaplace_lcdf(0.0 | mu, b);
  real lcc = mylaplace_lccdf(0.0 | mu, b);
}
