// Numeric literal forms, imaginary literals, strings.
transformed data {
  int i0 = 0;
  int i1 = 42;
  int i2 = 1000000;
  real r1 = 1.5;
  real r2 = 1.;
  real r3 = .5;
  real r4 = 1e3;
  real r5 = 1E-3;
  real r6 = 2.5e+2;
  real r7 = .25e1;
  real r8 = 3.e2;
  real r9 = 0.0;
  real r10 = 1_000.000_1;
  int i3 = 1_000_000;
  complex z1 = 2i;
  complex z2 = 1.5i;
  complex z3 = 3 + 4i;
  complex z4 = 1e2i;
  complex z5 = .5i;
  complex z6 = 2.i;
  complex z7 = 1 - 0.5e-1i;
  complex z8 = to_complex(1, -1);
  complex z9 = 7;
  real inf = positive_infinity();
  real ninf = negative_infinity();
  real nanv = not_a_number();
  real pie = pi() + e() + sqrt2() + log2() + log10() + machine_precision();
  print("literals: ", i1, " ", r1, " ", z3, " ", "a string with spaces and digits 123");
}
parameters {
  real x;
}
model {
  x ~ normal(r1 + r3 - r4 * r5, 2.0e0);
}
