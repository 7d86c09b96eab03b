// Three overlapping correlated Gaussian components on R^2 whose densities touch.
// Normalised: log Z = 0.
data {
  int<lower=1> K;
  simplex[K] w;
  array[K] vector[2] m;
  array[K] cov_matrix[2] S;
}
parameters {
  vector[2] x;
}
model {
  vector[K] lp;
  for (k in 1:K) {
    lp[k] = log(w[k]) + multi_normal_lpdf(x | m[k], S[k]);
  }
  target += log_sum_exp(lp);
}
