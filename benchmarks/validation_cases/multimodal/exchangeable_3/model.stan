// Three-component normal mixture (unit sd, known equal weights 1/3) with exchangeable means:
// label switching gives 3! = 6 symmetric posterior modes; E[mu[k]] is the same for every k.
data {
  int<lower=1> n;
  vector[n] y;
}
parameters {
  vector[3] mu;
}
model {
  mu ~ normal(0, 5);
  for (i in 1:n) {
    vector[3] lp;
    for (k in 1:3) {
      lp[k] = log(1.0 / 3) + normal_lpdf(y[i] | mu[k], 1);
    }
    target += log_sum_exp(lp);
  }
}
