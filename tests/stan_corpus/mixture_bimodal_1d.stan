// 1-D bimodal target density (no data): equal mixture of N(-3, 1) and N(3, 1); target += only.
parameters {
  real x;
}
model {
  target += log_mix(0.5, normal_lpdf(x | -3, 1), normal_lpdf(x | 3, 1));
}
