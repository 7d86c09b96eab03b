// Functions taking and returning tuples, including nested tuples and arrays.
functions {
  tuple(real, real) mean_sd(vector x) {
    return (mean(x), sd(x));
  }
  tuple(array[] int, tuple(real, vector)) pack(int n, vector v) {
    array[n] int idx;
    for (i in 1:n) idx[i] = i;
    return (idx, (sum(v), v));
  }
  real first_of(tuple(real, real) t) {
    return t.1;
  }
}
data {
  int<lower=2> N;
  vector[N] y;
}
transformed data {
  tuple(real, real) ms = mean_sd(y);
  real m;
  real s;
  (m, s) = mean_sd(y);
  tuple(array[N] int, tuple(real, vector[N])) pk = pack(N, y);
}
parameters {
  real mu;
  real<lower=0> sigma;
}
model {
  mu ~ normal(first_of(ms), 10);
  sigma ~ normal(ms.2, 5);
  y ~ normal(mu, sigma);
}
generated quantities {
  tuple(real, real) post = mean_sd([mu, sigma]');
}
