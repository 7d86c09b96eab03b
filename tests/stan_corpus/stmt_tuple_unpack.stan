// Tuple unpacking assignment (accepted by stanc 2.35), incl. indexed/sliced targets and nested tuples.
functions {
  tuple(real, vector) split_first(vector v) {
    return (v[1], v[2:rows(v)]);
  }
}
transformed data {
  real a;
  int b;
  (a, b) = (1.5, 2);
  real head;
  vector[3] tail;
  (head, tail) = split_first([1, 2, 3, 4]');
  array[2] real arr;
  arr = {0.0, 0.0};
  (arr[1], tail[2:3]) = (a, [head, head]');
  real c;
  tuple(int, real) inner;
  (c, inner) = (3.0, (4, 5.0));
  // swap
  (a, c) = (c, a);
}
parameters {
  real x;
}
model {
  real m;
  real s;
  (m, s) = (head, a);
  x ~ normal(m, s);
}
