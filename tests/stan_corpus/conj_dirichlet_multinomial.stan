// Conjugate Dirichlet-multinomial model.
data {
  int<lower=1> K;
  int<lower=0> M;
  array[M, K] int<lower=0> counts;
  vector<lower=0>[K] alpha;
}
parameters {
  simplex[K] theta;
}
model {
  theta ~ dirichlet(alpha);
  for (m in 1:M) counts[m] ~ multinomial(theta);
}
generated quantities {
  array[K] int draw = multinomial_rng(theta, 10);
}
