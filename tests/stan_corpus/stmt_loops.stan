// for, foreach over arrays/vectors/row_vectors/matrices, while, break, continue.
data {
  int<lower=1> N;
  vector[N] y;
  array[N] int<lower=0, upper=1> flag;
}
transformed data {
  real s = 0;
  for (v in y) s += v;              // foreach over vector
  for (f in flag) s += f;           // foreach over int array
  matrix[2, 3] M = [[1, 2, 3], [4, 5, 6]];
  for (m in M) s += m;              // foreach over matrix elements
  for (r in [1, 2, 3]) s += r;      // foreach over row_vector literal
  array[2, 2] real A = {{1.0, 2.0}, {3.0, 4.0}};
  for (row in A) for (x in row) s += x;
  int i = 0;
  while (1) {
    i += 1;
    if (i > 100) break;
    if (i % 2 == 0) continue;
    s += i;
  }
  int j = N;
  while (j > 0) j -= 1;
  for (k in 1:0) s += 1000;         // empty range
  for (k in 1:N) {
    if (flag[k]) continue;
    for (l in k:N) {
      if (l > k + 2) break;
      s += 0.001;
    }
  }
}
parameters {
  real mu;
}
model {
  for (n in 1:N) {
    if (flag[n] == 0) continue;
    y[n] ~ normal(mu, 1);
  }
  mu ~ normal(s / 1000, 10);
}
