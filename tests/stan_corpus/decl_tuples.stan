// Tuple declarations: simple, nested, with arrays, arrays of tuples, as data, parameters, gq.
data {
  tuple(int, real) t1;
  tuple(array[3] real, vector[2]) t2;
  tuple(int, tuple(real, vector[2])) t3;
  array[2] tuple(int, real) at;
}
transformed data {
  tuple(real, real) p = (t1.2, t1.1 * 1.0);
  tuple(matrix[2, 2], array[2] int) q = ([[1, 0], [0, 1]], {1, 2});
  tuple(tuple(real, int), array[2] tuple(real, complex)) deep
      = ((1.5, 3), {(1.0, to_complex(1, 2)), (2.0, 3i)});
  real s = t2.1[1] + t2.2[2] + t3.2.1 + t3.2.2[1] + at[2].2 + deep.2[1].1;
}
parameters {
  tuple(real, real<lower=0>) loc_scale;
  tuple(vector[2], simplex[3]) vt;
}
model {
  loc_scale.1 ~ normal(s, 1);
  loc_scale.2 ~ lognormal(0, 1);
  vt.1 ~ normal(t2.2, loc_scale.2);
}
generated quantities {
  tuple(real, tuple(int, vector[2])) out = (loc_scale.1, (t1.1, vt.1));
  array[2] tuple(real, real) pairs = {(loc_scale.1, loc_scale.2), p};
}
