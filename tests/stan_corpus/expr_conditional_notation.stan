// Conditional-notation (`|`) calls for built-in lpdf/lpmf/lcdf/lccdf, scalar and vectorised; target += only.
// (_lupdf/_lupmf conditional notation: see fun_suffixes.stan and mixed_tilde_target.stan.)
data {
  int<lower=1> N;
  vector[N] y;
  array[N] int<lower=0> k;
  array[N] int<lower=0, upper=1> b;
}
parameters {
  real mu;
  real<lower=0> sigma;
  real<lower=0> lambda;
  real<lower=0, upper=1> p;
}
model {
  target += normal_lpdf(mu | 0, 10);
  target += lognormal_lpdf(sigma | 0, 1);
  target += gamma_lpdf(lambda | 2, 1);
  target += beta_lpdf(p | 2, 2);
  target += normal_lpdf(y | mu, sigma);
  target += poisson_lpmf(k | lambda);
  target += bernoulli_lpmf(b | p);
  target += normal_lcdf(10 | mu, sigma);
  target += normal_lccdf(-10 | mu, sigma);
  target += poisson_lcdf(50 | lambda) + poisson_lccdf(0 | lambda);
  target += student_t_lpdf(mu | 3, 0, 1) + binomial_lpmf(3 | 10, p);
  target += std_normal_lpdf(y);
  target += normal_cdf(0.0 | mu, sigma) > 0 ? 0 : 0;
}
generated quantities {
  real ll = normal_lpdf(y | mu, sigma) + poisson_lpmf(k | lambda);
  real c = normal_cdf(0 | mu, sigma);
}
