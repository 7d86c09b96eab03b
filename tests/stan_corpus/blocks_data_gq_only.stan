/* Only data and generated quantities: a pure simulation program. */
data {
  int<lower=1> N;
  real mu;
  real<lower=0> sigma;
}
generated quantities {
  array[N] real y_sim;
  for (n in 1:N) {
    y_sim[n] = normal_rng(mu, sigma);
  }
  real m = mean(y_sim);
}
