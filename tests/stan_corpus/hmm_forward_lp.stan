// Hidden Markov model with Gaussian emissions; forward algorithm in a user _lp function.
functions {
  void hmm_forward_lp(vector y, array[] vector log_Gamma, vector log_pi,
                      vector mu, real sigma) {
    int K = rows(mu);
    int T = rows(y);
    vector[K] alpha;
    vector[K] alpha_new;
    for (k in 1:K) alpha[k] = log_pi[k] + normal_lpdf(y[1] | mu[k], sigma);
    for (t in 2:T) {
      for (k in 1:K) {
        vector[K] acc;
        for (j in 1:K) acc[j] = alpha[j] + log_Gamma[j][k];
        alpha_new[k] = log_sum_exp(acc) + normal_lpdf(y[t] | mu[k], sigma);
      }
      alpha = alpha_new;
    }
    target += log_sum_exp(alpha);
  }
}
data {
  int<lower=1> T;
  int<lower=1> K;
  vector[T] y;
}
parameters {
  array[K] simplex[K] Gamma;
  simplex[K] pi0;
  ordered[K] mu;
  real<lower=0> sigma;
}
model {
  array[K] vector[K] log_Gamma;
  for (k in 1:K) {
    Gamma[k] ~ dirichlet(rep_vector(1, K) + 4 * one_hot_vector(K, k));
    log_Gamma[k] = log(Gamma[k]);
  }
  mu ~ normal(0, 5);
  sigma ~ exponential(1);
  hmm_forward_lp(y, log_Gamma, log(pi0), mu, sigma);
}
