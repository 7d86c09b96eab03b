// A program consisting of a functions block only.
functions {
  real logistic_fn(real x) {
    return 1 / (1 + exp(-x));
  }
  vector softplus_vec(vector x) {
    return log1p_exp(x);
  }
}
