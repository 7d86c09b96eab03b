parameters {
  real x;
  vector[3] v;
}
model {
  x ~ std_normal();
  v ~ normal(x, 1);
}
