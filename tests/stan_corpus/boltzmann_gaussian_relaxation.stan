// Boltzmann machine relaxed by the Gaussian-integral (Hubbard-Stratonovich) trick:
// binary units s in {-1,+1}^K are marginalised, giving a mixture of 2^K Gaussians
// p(x) ∝ sum_s exp(b's) N(x | W s, I).  The continuous variable x is the parameter.
data {
  int<lower=1> K;          // number of binary units (2^K states enumerated)
  int<lower=1> D;          // dimension of continuous relaxation
  matrix[D, K] W;
  vector[K] b;
}
transformed data {
  int S = 1;
  for (k in 1:K) S *= 2;
  matrix[K, S] states;
  for (s in 1:S) {
    int code = s - 1;
    for (k in 1:K) {
      states[k, s] = (code % 2 == 1) ? 1 : -1;
      code = code %/% 2;
    }
  }
  vector[S] log_w;
  for (s in 1:S) log_w[s] = dot_product(b, col(states, s));
  log_w -= log_sum_exp(log_w);
}
parameters {
  vector[D] x;
}
model {
  vector[S] lps;
  for (s in 1:S) {
    lps[s] = log_w[s] + normal_lpdf(x | W * col(states, s), 1);
  }
  target += log_sum_exp(lps);
}
generated quantities {
  vector[S] post_state;
  {
    vector[S] lps;
    for (s in 1:S) lps[s] = log_w[s] + normal_lpdf(x | W * col(states, s), 1);
    post_state = softmax(lps);
  }
}
