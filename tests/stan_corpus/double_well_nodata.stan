// Symmetric double-well target with barrier height in transformed data; no data block.
transformed data {
  real barrier = 4.0;
}
parameters {
  real x;
}
model {
  target += -barrier * (x ^ 4 - 2 * x ^ 2);
}
