"""A change-point model the marginalisation tests share (fast and compiled):
``y_t ~ N(t < s ? mu1 : mu2, 1)`` with ``s`` continuous on ``(0, N)``."""

CHANGE_POINT = """
data {
  int<lower=1> N;
  vector[N] y;
}
parameters {
  real mu1;
  real mu2;
  real<lower=0, upper=N> s;
}
model {
  mu1 ~ normal(0, 5);
  mu2 ~ normal(0, 5);
  s ~ uniform(0, N);
  for (t in 1:N)
    y[t] ~ normal(t < s ? mu1 : mu2, 1);
}
generated quantities {
  real jump = mu2 - mu1;
}
"""
