// Array, row-vector, matrix, complex and tuple literals; tuple .N indexing.
transformed data {
  array[3] int ai = {1, 2, 3};
  array[2, 2] real ar = {{1.0, 2}, {3, 4.5}};
  array[2] vector[2] av = {[1, 2]', [3, 4]'};
  row_vector[3] rv = [1, 2.5, 3];
  vector[3] cv = [1, 2, 3]';
  matrix[2, 3] M = [[1, 2, 3], [4, 5, 6]];
  matrix[2, 2] Mrv = [rv[1:2], [7, 8]];
  complex_row_vector[2] crv = [1 + 2i, 3];
  complex_matrix[2, 2] cM = [[1i, 2], [3, 4 - 1i]];
  complex_vector[2] ccv = [1i, 2i]';
  array[2] complex ac = {1i, 2};
  tuple(int, real, vector[3]) t = (1, 2.5, cv);
  tuple(int, tuple(real, array[2] int)) nt = (1, (2.0, {3, 4}));
  array[2] tuple(real, int) at = {(1.0, 2), (3.0, 4)};
  real s = t.2 + t.3[1] + nt.2.1 + nt.2.2[2] + at[2].1 + at[1].2;
  array[2] row_vector[2] arv = {[1, 2], [3, 4]};
  array[0] real empty_arr;
  vector[0] empty_vec = [ ]';
}
parameters {
  real x;
}
model {
  x ~ normal(s, M[2, 3]);
}
