// Full operator set and precedence, with and without parentheses.
data {
  int<lower=1> n;
  real x;
  real y;
}
transformed data {
  // arithmetic precedence
  real a1 = 1 + 2 * 3 - 4 / 2.0;
  real a2 = (1 + 2) * (3 - 4) / 2.0;
  real a3 = -2 ^ 2;               // -(2^2)
  real a4 = 2 ^ 3 ^ 2;            // right assoc: 2^(3^2)
  real a5 = (2 ^ 3) ^ 2;
  real a6 = -x ^ -y;
  real a7 = +x - -y;
  real a8 = x * -y + +3;
  int i1 = 7 % 3 + 7 %/% 2 * 2;
  int i2 = -7 %/% 2;
  int i3 = 17 % 5 * 2;
  int i4 = n * (n + 1) %/% 2;
  // logical / comparison precedence
  int b1 = x < y || x >= y && !(x == y);
  int b2 = !0 && 1 || 0;
  int b3 = x != y == 1;
  int b4 = 1 < 2 == 2 > 1;
  int b5 = x <= y || y > x && x != 0;
  int b6 = !!n;
  int b7 = -n < 0 && !(n % 2 == 1 || n > 10);
  // conditional operator (right associative) mixed with others
  real c1 = x > y ? x : y > 0 ? y : -y;
  real c2 = (x > y ? x : y) + 1;
  real c3 = b1 ? 1 + x * 2 : 3 - y / 4;
  // matrix / elementwise operators and transpose
  matrix[2, 2] A = [[1, 2], [3, 4]];
  vector[2] v = [1, 2]';
  row_vector[2] r = v';
  matrix[2, 2] B = A * A' - A .* A + A ./ (A + 1) - A / A + A \ A;
  vector[2] w = A \ v + A' * v .* v ./ (v + 1);
  row_vector[2] u = r / A + r * A .^ 2;
  real q = r * A * v + v' * v;
  matrix[2, 2] E = A .^ 2 .^ 0.5;
  matrix[2, 2] F = -A' + +A;
  vector[2] G = 2 .^ v;
  real ex = (v' * v) ^ 0.5 * 2;
  real tq = (v')[1] + (A')[1, 2];
  matrix[2, 2] H = (A')';
  int cmp = (a1 + a2 > c1) || (a3 <= a4 && a5 >= a6);
}
parameters {
  real mu;
}
model {
  mu ~ normal(a1 + a2 * a3 / (1 + a4 ^ 0.1), 1 + (i1 > 0 ? 1 : 2));
}
generated quantities {
  real z = mu > 0 ? mu ^ 2 : -mu ^ 2;
  int sgn = mu > 0 && !(mu > 10) || mu < -10;
}
