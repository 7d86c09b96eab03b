// Sparse regression with the regularised (Finnish) horseshoe prior (Piironen & Vehtari 2017).
data {
  int<lower=0> N;
  int<lower=1> D;
  matrix[N, D] X;
  vector[N] y;
  real<lower=0> scale_icept;
  real<lower=0> scale_global;
  real<lower=1> nu_global;
  real<lower=1> nu_local;
  real<lower=0> slab_scale;
  real<lower=0> slab_df;
}
parameters {
  real beta0;
  real<lower=0> sigma;
  vector[D] z;
  real<lower=0> tau;
  vector<lower=0>[D] lambda;
  real<lower=0> caux;
}
transformed parameters {
  real<lower=0> c = slab_scale * sqrt(caux);
  vector<lower=0>[D] lambda_tilde = sqrt(c ^ 2 * square(lambda) ./ (c ^ 2 + tau ^ 2 * square(lambda)));
  vector[D] beta = z .* lambda_tilde * tau;
}
model {
  z ~ std_normal();
  lambda ~ student_t(nu_local, 0, 1);
  tau ~ student_t(nu_global, 0, scale_global * sigma);
  caux ~ inv_gamma(0.5 * slab_df, 0.5 * slab_df);
  beta0 ~ normal(0, scale_icept);
  sigma ~ exponential(1);
  y ~ normal(beta0 + X * beta, sigma);
}
