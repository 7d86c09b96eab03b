// Mixture of K isotropic bivariate Gaussians (Kou, Zhou & Wong 2006; the
// 20-component benchmark of the pseudo-extended paper, section 4).
// The density is normalised: log Z = 0.
data {
  int<lower=1> K;
  array[K] vector[2] mu;      // component means
  simplex[K] w;               // component weights
  vector<lower=0>[K] sigma;   // component standard deviations (covariance sigma^2 I)
}
parameters {
  vector[2] x;
}
model {
  vector[K] lp;
  for (k in 1:K) {
    lp[k] = log(w[k]) + normal_lpdf(x | mu[k], sigma[k]);
  }
  target += log_sum_exp(lp);
}
