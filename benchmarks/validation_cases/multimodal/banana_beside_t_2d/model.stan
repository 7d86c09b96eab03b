// A banana beside a heavy-tailed mode: 0.5 x banana (x1 ~ normal(-3, 1.5),
// x2 ~ normal(0.6 ((x1 + 3)^2 - 1.5^2), 1)), whose arms rise towards
// 0.5 x independent student_t(5, (3, 2), 1) coordinates. Normalised: log Z = 0.
parameters {
  vector[2] x;
}
model {
  real banana = normal_lpdf(x[1] | -3, 1.5)
                + normal_lpdf(x[2] | 0.6 * (square(x[1] + 3) - square(1.5)), 1);
  real heavy = student_t_lpdf(x[1] | 5, 3, 1) + student_t_lpdf(x[2] | 5, 2, 1);
  target += log_mix(0.5, banana, heavy);
}
