// Two round modes joined by a thin ridge: 0.6 x normal((-4, 0), 0.5), 0.3 x
// normal((4, 0), 0.5), 0.1 x a ridge normal((0, 0), (4, 0.05)) between them.
// Normalised: log Z = 0.
parameters {
  vector[2] x;
}
model {
  vector[3] lp;
  lp[1] = log(0.6) + normal_lpdf(x | [-4, 0]', 0.5);
  lp[2] = log(0.3) + normal_lpdf(x | [4, 0]', 0.5);
  lp[3] = log(0.1) + normal_lpdf(x[1] | 0, 4) + normal_lpdf(x[2] | 0, 0.05);
  target += log_sum_exp(lp);
}
