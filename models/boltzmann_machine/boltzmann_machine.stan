// Gaussian-mixture relaxation of a Boltzmann machine (Graham & Storkey 2017, appendix B).
// The binary units s in {-1, +1}^D_B of P(s) ∝ exp(s'Ws/2 + s'b) are marginalised out of
// x | s ~ N(Q's, I), QQ' = W + diag(d), leaving a mixture of 2^D_B unit-variance Gaussians:
//   p(x) ∝ N(x | 0, I) * prod_i cosh(q_i'x + b_i).
// Data from generate_data.py; exact log Z, E[x], Cov[x] in ground_truth.json.
data {
  int<lower=1> D_B;        // number of binary units
  int<lower=1> D;          // dimension of the relaxation (rank of W + diag(d))
  matrix[D_B, D] Q;        // QQ' = W + diag(d)
  vector[D_B] b;           // biases
}
parameters {
  vector[D] x;
}
model {
  x ~ std_normal();
  profile("likelihood") {
    // log cosh(u) = |u| + log1p(exp(-2|u|)) - log 2, stable for large |u|
    vector[D_B] u = Q * x + b;
    target += sum(abs(u) + log1p_exp(-2 * abs(u))) - D_B * log2();
  }
}
