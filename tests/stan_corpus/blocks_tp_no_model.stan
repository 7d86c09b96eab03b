// Parameters and transformed parameters without a model block (uniform density on (0, 1)).
parameters {
  real<lower=0, upper=1> p;
}
transformed parameters {
  real logit_p = logit(p);
}
