// Every unconstrained declaration type, in data, transformed data, parameters, gq.
data {
  int<lower=1> N;
  int<lower=1> M;
  int k;
  real r;
  complex zc;
  vector[N] v;
  row_vector[M] rv;
  matrix[N, M] A;
  complex_vector[N] cv;
  complex_row_vector[M] crv;
  complex_matrix[N, M] cA;
  array[2] int ia;
  array[2, 3] real ra;
  array[2] vector[N] va;
  array[2] row_vector[M] rva;
  array[2] matrix[N, M] Aa;
  array[2] complex ca;
  array[2] complex_vector[N] cva;
  array[2] complex_row_vector[M] crva;
  array[2] complex_matrix[N, M] cAa;
}
transformed data {
  int k2 = k * 2;
  real r2 = r / 2;
  complex z2 = zc * 2;
  vector[N] v2 = 2 * v;
  row_vector[M] rv2 = rv * 2;
  matrix[N, M] A2 = A + A;
  complex_vector[N] cv2 = cv + v;
  complex_row_vector[M] crv2 = crv * 3;
  complex_matrix[N, M] cA2 = cA + A;
  array[3, 2, 2] int ia3;
  for (i in 1:3) for (j in 1:2) for (l in 1:2) ia3[i, j, l] = i + j + l;
}
parameters {
  real mu;
  vector[N] beta;
  row_vector[M] gamma;
  matrix[N, M] Z;
  array[2] real eta;
  array[2] vector[N] xi;
  complex cz;
  complex_vector[2] czv;
  complex_row_vector[2] czrv;
  complex_matrix[2, 2] czm;
}
model {
  mu ~ normal(r, 1);
  beta ~ normal(v, 1);
  gamma ~ normal(rv, 1);
  to_vector(Z) ~ normal(to_vector(A), 1);
  eta ~ normal(0, 1);
  for (i in 1:2) xi[i] ~ normal(va[i], 1);
  get_real(cz) ~ normal(0, 1);
  get_imag(cz) ~ normal(0, 1);
  get_real(czv) ~ std_normal();
  get_imag(czv) ~ std_normal();
  get_real(czrv) ~ std_normal();
  get_imag(czrv) ~ std_normal();
  to_vector(get_real(czm)) ~ std_normal();
  to_vector(get_imag(czm)) ~ std_normal();
}
generated quantities {
  int kk = k2 + 1;
  real s = sum(beta) + sum(gamma) + sum(Z);
  complex w = cz * conj(cz);
  vector[N] bb = beta .* v2;
  row_vector[M] gg = gamma;
  matrix[N, M] ZZ = Z;
  complex_vector[N] cvv = cv2;
  complex_row_vector[M] crvv = crv2;
  complex_matrix[N, M] cAA = cA2;
  array[2] complex_matrix[2, 2] czma = {czm, czm'};
}
