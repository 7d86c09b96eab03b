// Indexing: single, multi-index arrays, slices a[l:u], a[l:], a[:u], a[:], nested, on all containers.
data {
  int<lower=5> N;
  vector[N] v;
  array[N] int<lower=1, upper=N> perm;
  matrix[N, N] M;
}
transformed data {
  array[3] int idxs = {1, 3, 5};
  vector[3] v1 = v[idxs];
  vector[N - 1] v2 = v[2:];
  vector[3] v3 = v[:3];
  vector[N] v4 = v[:];
  vector[N] v5 = v[perm];
  vector[2] v6 = v[2:3];
  real e = v[idxs][2];
  row_vector[N] m1 = M[1];
  row_vector[N] m1b = M[1, :];
  vector[N] c1 = M[:, 1];
  matrix[3, 3] sub = M[idxs, idxs];
  matrix[2, N] top = M[:2, ];
  matrix[2, N] top2 = M[:2];
  matrix[N, 2] right = M[:, N - 1:];
  vector[3] diag3 = M[idxs, 2];
  row_vector[3] rsub = M[2, idxs];
  real el = M[2, 3];
  real el2 = M[2][3];
  array[N] int rev;
  for (i in 1:N) rev[i] = N - i + 1;
  vector[N] vr = v[rev];
  array[2, 3] real A = {{1, 2, 3}, {4, 5, 6}};
  array[3] real A1 = A[2];
  array[2] real A2 = A[:, 2];
  array[2, 2] real A3 = A[:, 2:3];
  array[2] real A4 = A[2, {1, 3}];
  array[2] vector[N] av = {v, v};
  array[2] real avx = av[:, 3];
  real avy = av[2, 3];
  real avz = av[2][3];
  vector[3] avw = av[1, idxs];
  array[2] real afirst = to_array_1d(to_vector({av[1, 1], av[2, 1]}));
  real lit = [1, 2, 3][2] + {4, 5, 6}[3] + [[1, 2], [3, 4]][2, 1];
}
parameters {
  vector[N] theta;
}
model {
  theta[idxs] ~ normal(v1, 1);
  theta[:2] ~ normal(0, 1);
  theta[4] ~ normal(v[4], 1);
  theta[6:] ~ normal(v[6:], 1);
}
