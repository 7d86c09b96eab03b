// transformed data + parameters + model, no data block, empty-ish generated quantities.
transformed data {
  int K = 4;
  vector[K] loc = linspaced_vector(K, -1.5, 1.5);
}
parameters {
  vector[K] theta;
}
model {
  theta ~ normal(loc, 0.5);
}
generated quantities {
}
