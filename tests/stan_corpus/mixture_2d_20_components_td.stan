// Same 20-component 2-D mixture, means hard-coded as a matrix literal in transformed data.
transformed data {
  int K = 20;
  matrix[K, 2] M = [[2.18, 5.76], [8.67, 9.59], [4.24, 8.48], [8.41, 1.68], [3.93, 8.82],
                    [3.25, 3.47], [1.70, 0.50], [4.59, 5.60], [6.91, 5.81], [6.87, 5.40],
                    [5.41, 2.65], [2.70, 7.88], [4.98, 3.70], [1.14, 2.39], [8.33, 9.50],
                    [4.93, 1.50], [1.83, 0.09], [2.26, 0.31], [5.54, 6.86], [1.69, 8.11]];
  real sigma = 0.1;
}
parameters {
  vector<lower=0, upper=10>[2] x;
}
model {
  vector[K] lps;
  for (k in 1:K) {
    lps[k] = normal_lpdf(x | M[k]', sigma);
  }
  target += log_sum_exp(lps) - log(K);
}
