// A heavy-tailed mode beside a narrow one: 0.7 x independent student_t(5, -2, 1.2)
// coordinates, 0.3 x normal((3, 3), 0.3). Normalised: log Z = 0.
parameters {
  vector[2] x;
}
model {
  target += log_mix(0.7, student_t_lpdf(x | 5, -2, 1.2), normal_lpdf(x | 3, 0.3));
}
