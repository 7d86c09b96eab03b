// Gaussian-mixture relaxation of a 10-unit Boltzmann machine (Graham & Storkey 2017, appendix B):
// p(x) propto N(x | 0, I) * prod_i cosh(q_i'x + b_i), a mixture of 2^10 unit-variance Gaussians
// N(Q's, I) over s in {-1, +1}^10 with weights propto exp(s'QQ's / 2 + s'b). Same program as
// models/boltzmann_machine/boltzmann_machine.stan; data from its generate_data.py
// (make_machine(10, seed=1), Q and b rounded to 6 decimals); exact answers by enumeration.
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
