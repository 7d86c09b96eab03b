// Profile blocks in several program blocks, nested.
data {
  int<lower=1> N;
  vector[N] x;
  vector[N] y;
}
transformed data {
  vector[N] xc;
  profile("center") {
    xc = x - mean(x);
  }
}
parameters {
  real alpha;
  real beta;
  real<lower=0> sigma;
}
model {
  profile("priors") {
    alpha ~ normal(0, 10);
    beta ~ normal(0, 10);
    sigma ~ exponential(1);
  }
  profile("likelihood") {
    vector[N] mu;
    profile("linpred") {
      mu = alpha + beta * xc;
    }
    y ~ normal(mu, sigma);
  }
}
generated quantities {
  real r2;
  profile("gq") {
    r2 = 1 - sigma ^ 2 / variance(y);
  }
}
