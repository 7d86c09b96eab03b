/* Block comment at top of file.
 * Spanning several lines, containing code-like text: x ~ normal(0, 1);
 */
// Line comment.
data { // comment after brace
  int<lower=0> N; /* inline block comment */ vector[N] y; // two decls on one line
}
parameters {
  real /* inside a declaration */ mu;
  real<lower=0 /* in a bound */> sigma;
}
model {
  // comment before statement
  mu ~ normal(0, /* mid-expression */ 10); // trailing
  sigma ~ exponential(
      1 // comment inside argument list
  );
  /* multi
     line */ y ~ normal(mu, sigma);
  /**/
  //
}
// comment at end of file
