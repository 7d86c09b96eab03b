// Two well-separated Gaussians in 20 dimensions: weight 0.35 at -1.5 (sd 1) and 0.65 at +1.5
// (sd 0.7) in every coordinate, modes 3 * sqrt(20) = 13.4 apart. Normalised: log Z = 0.
parameters {
  vector[20] x;
}
model {
  target += log_mix(0.35, normal_lpdf(x | -1.5, 1), normal_lpdf(x | 1.5, 0.7));
}
