// Bounds given by arbitrary expressions, vectorised (container) bounds,
// and bounds depending on other parameters.
data {
  int<lower=1> N;
  vector[N] lo;
  vector<lower=lo>[N] hi;
  real<lower=min(lo), upper=max(hi)> mid;
}
transformed data {
  int<lower=0, upper=N> half = N %/% 2;
  array[N] real<lower=0> w = rep_array(1.0, N);
}
parameters {
  real<lower=0> tau;
  real<lower=-tau, upper=tau> x;
  vector<lower=lo, upper=hi>[N] y;
  vector<lower=lo>[N] y_lo;
  vector<upper=hi + 1>[N] y_hi;
  row_vector<lower=0, upper=log1p(tau) + 1>[2] rv;
  array[2] real<lower=x> above_x;
  vector<lower=(x < 0 ? x : -x), upper=abs(x) + 1>[N] z;
  matrix<lower=to_matrix(lo, N, 1), upper=to_matrix(hi, N, 1)>[N, 1] Zm;
}
model {
  tau ~ exponential(1);
  y ~ normal(mid, 1);
  y_lo ~ normal(lo, 1);
  y_hi ~ normal(hi, 1);
  above_x ~ normal(x, 1);
  z ~ normal(0, 1);
  rv ~ normal(0, 1);
  to_vector(Zm) ~ normal(mid, 1);
}
