// HMM using the built-in hmm_marginal and hmm_latent_rng; target += only.
data {
  int<lower=1> T;
  int<lower=1> K;
  vector[T] y;
}
parameters {
  array[K] simplex[K] rows_Gamma;
  simplex[K] rho;
  ordered[K] mu;
  real<lower=0> sigma;
}
transformed parameters {
  matrix[K, T] log_omega;
  matrix[K, K] Gamma;
  for (k in 1:K) Gamma[k] = rows_Gamma[k]';
  for (t in 1:T) for (k in 1:K) log_omega[k, t] = normal_lpdf(y[t] | mu[k], sigma);
}
model {
  target += normal_lpdf(mu | 0, 5);
  target += exponential_lpdf(sigma | 1);
  for (k in 1:K) target += dirichlet_lpdf(rows_Gamma[k] | rep_vector(2, K));
  target += hmm_marginal(log_omega, Gamma, rho);
}
generated quantities {
  array[T] int z = hmm_latent_rng(log_omega, Gamma, rho);
  matrix[K, T] probs = hmm_hidden_state_prob(log_omega, Gamma, rho);
}
