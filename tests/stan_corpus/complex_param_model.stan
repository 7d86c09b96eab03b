// Parameters combined into complex numbers; likelihood on real and imaginary parts (target += only).
data {
  int<lower=1> N;
  complex_vector[N] z_obs;
}
parameters {
  real re;
  real im;
  real<lower=0> s;
}
model {
  complex c = to_complex(re, im);
  target += normal_lpdf(re | 0, 5) + normal_lpdf(im | 0, 5) + exponential_lpdf(s | 1);
  for (n in 1:N) {
    complex d = z_obs[n] - c;
    target += normal_lpdf(get_real(d) | 0, s) + normal_lpdf(get_imag(d) | 0, s);
  }
}
generated quantities {
  real modulus = abs(to_complex(re, im));
}
