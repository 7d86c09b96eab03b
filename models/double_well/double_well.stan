// Double-well potential (Zhang, "Advanced MCMC", lecture 5, parallel-tempering example:
// f_T(x) ∝ exp(-(x^2 - 1)^2 / T)) in D independent coordinates, with inverse temperature
// kappa = 1/T and a linear tilt h that makes the two wells of each coordinate unequal:
//
//   log f(x) = sum_d [ -kappa * (x_d^2 - 1)^2 + h_d * x_d ]
//
// Wells near x_d = -1 and x_d = +1; the barrier at x_d = 0 is about kappa nats high.
// The density is NOT normalised: log Z = sum_d log ∫ exp(-kappa (t^2 - 1)^2 + h_d t) dt,
// computed by quadrature in generate_data.py (ground_truth.json).
data {
  int<lower=1> D;            // number of coordinates (2^D wells)
  real<lower=0> kappa;       // inverse temperature 1/T (barrier height in nats)
  vector[D] h;               // tilt: the well at +1 has about exp(2 h_d) times the mass
}
parameters {
  vector[D] x;
}
model {
  target += -kappa * dot_self(square(x) - 1) + dot_product(h, x);
}
