// Mixture of K isotropic bivariate Gaussians (Kou, Zhou & Wong 2006; the
// 20-component benchmark of the pseudo-extended paper, section 4).
// The density is normalised: log Z = 0.  As in Nemeth et al.'s experiments
// (their code puts a uniform prior on each coordinate: (-10, 10) in scenario a,
// (-100, 100) in scenario b), x lives on the box [box_lower, box_upper]^2.  The
// mixture mass outside it is about 1e-6 (a) and below exp(-15000) (b), so the
// moments and log Z = 0 are those of the mixture on R^2, and the tempered
// instrumental gamma(x)^beta of pseudo-extended MCMC stays proper as beta -> 0.
data {
  int<lower=1> K;
  array[K] vector[2] mu;      // component means
  simplex[K] w;               // component weights
  vector<lower=0>[K] sigma;   // component standard deviations (covariance sigma^2 I)
  real box_lower;             // support of each coordinate
  real<lower=box_lower> box_upper;
}
parameters {
  vector<lower=box_lower, upper=box_upper>[2] x;
}
model {
  vector[K] lp;
  for (k in 1:K) {
    lp[k] = log(w[k]) + normal_lpdf(x | mu[k], sigma[k]);
  }
  target += log_sum_exp(lp);
}
