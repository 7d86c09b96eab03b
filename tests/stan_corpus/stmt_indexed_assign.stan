// Indexed assignment targets: single, multi-index, slices, nested arrays, matrices rows/cols.
data {
  int<lower=4> N;
  array[3] int<lower=1, upper=N> idxs;
}
transformed data {
  vector[N] v = rep_vector(0, N);
  v[1] = 1;
  v[2:3] = [2, 3]';
  v[:2] = v[3:4];
  v[N - 1:] = rep_vector(9, 2);
  v[idxs] = [7, 8, 9]';
  v[:] = v * 2;
  matrix[3, 3] M = rep_matrix(0, 3, 3);
  M[1] = [1, 2, 3];
  M[2, :] = [4, 5, 6];
  M[:, 3] = [0, 0, 1]';
  M[2:3, 1:2] = [[1, 1], [1, 1]];
  M[3, 3] = -1;
  M[{1, 3}, 2] = [5, 5]';
  array[2, 3] real a;
  a[1] = {1.0, 2.0, 3.0};
  a[2, :] = a[1];
  a[2, 2:3] = {0.0, 0.0};
  array[2] vector[3] av;
  av[1] = [1, 2, 3]';
  av[2][2:3] = [1, 1]';
  av[2, 1] = 0;
  array[2] matrix[2, 2] am;
  am[1] = identity_matrix(2);
  am[2] = am[1];
  am[2, 1, 2] = 3;
  am[2][2, :] = [8, 9];
}
parameters {
  vector[N] theta;
}
model {
  vector[N] mu;
  mu[1:2] = rep_vector(0, 2);
  mu[3:N] = v[3:N];
  theta ~ normal(mu, 1);
}
