// A broad sample of built-in functions (scalar, vectorised, matrix, complex, special).
data {
  int<lower=2> N;
  vector[N] x;
}
transformed data {
  real s = log_sum_exp(x) + log_softmax(x)[1] + softmax(x)[2] + sum(exp(x)) + prod(x)
           + min(x) + max(x) + sd(x) + variance(x) + norm2(x) + norm1(x);
  vector[N] ranks = sort_asc(x);
  array[N] int order = sort_indices_desc(x);
  matrix[N, N] K = add_diag(x * x', 1.0);
  matrix[N, N] L = cholesky_decompose(K);
  real ld = log_determinant(K) + log_determinant_spd(K);
  vector[N] sol = mdivide_left_tri_low(L, x);
  vector[N] ev = eigenvalues_sym(K);
  matrix[N, N] Kinv = inverse_spd(K);
  real tr = trace(K) + quad_form(K, x) + trace_quad_form(K, to_matrix(x));
  complex_vector[N] fx = fft(to_complex(x, rep_vector(0, N)));
  real sp = lgamma(3.5) + tgamma(2.5) + lbeta(2, 3) + lchoose(5, 2)
            + inv_logit(0.3) + logit(0.3) + log1p(0.1) + expm1(0.1) + log1m_exp(-1) + log_diff_exp(2, 1)
            + erf(0.5) + erfc(0.5) + Phi(0.5) + inv_Phi(0.3) + Phi_approx(0.5) + fma(1, 2, 3)
            + hypot(3, 4) + fmin(1, 2) + fmax(1, 2) + fdim(3, 1) + fmod(5, 3) + cbrt(27) + inv(2)
            + inv_sqrt(4) + inv_square(2) + inv_cloglog(0.2) + log_inv_logit(0.3) + log1m_inv_logit(0.3)
            + step(1) + int_step(2) + trunc(2.7) + round(2.5) + floor(2.5) + ceil(2.5)
            + atan2(1, 2) + asinh(1) + acosh(2) + atanh(0.5) + owens_t(1, 0.5) + lmgamma(2, 3.0)
            + bessel_first_kind(1, 1.0) + modified_bessel_second_kind(1, 1.0) + falling_factorial(5, 2)
            + log_falling_factorial(5, 2) + rising_factorial(5, 2) + log_rising_factorial(5, 2)
            + gamma_p(2, 1) + gamma_q(2, 1) + inc_beta(2, 3, 0.5) + lambert_w0(1) + log_modified_bessel_first_kind(0.5, 2)
            + digamma(2) + trigamma(2) + binary_log_loss(1, 0.3) + choose(5, 2) + logical_eq(1, 1);
  complex zc = exp(1i * pi()) + sqrt(to_complex(-1, 0)) + pow(1i, 2) + abs(3 + 4i) + arg(1i) + norm(1 + 1i) + proj(1i) + polar(1, 0.5);
  int sz = size(x) + num_elements(K) + rows(K) + cols(K) + rank(x, 1) + sum({1, 2}) + max({3, 4});
  matrix[N, N] blk = block(K, 1, 1, N, N) + diag_matrix(x) + diag_pre_multiply(x, K) + diag_post_multiply(K, x);
  vector[N + 2] app = append_row(x, [1, 2]');
  row_vector[N + 1] appc = append_col(x', 1);
  vector[N] cs = cumulative_sum(x) + reverse(x) + head(append_row(x, x), N) + tail(append_row(x, x), N) + segment(append_row(x, x), 2, N);
  matrix[N, N] me = matrix_exp(-K / 100) + matrix_power(K, 2) + tcrossprod(K) + crossprod(K) + multiply_lower_tri_self_transpose(L);
  array[3] int seq = linspaced_int_array(3, 1, 3);
  vector[N] oh = one_hot_vector(N, 1) + zeros_vector(N) + ones_vector(N) + uniform_simplex(N);
}
parameters {
  real mu;
}
model {
  mu ~ normal(0, 1);
}
