// Algebraic solvers: solve_newton, solve_powell, *_tol variants and the older algebra_solver.
functions {
  vector system(vector y, vector theta) {
    vector[2] z;
    z[1] = y[1] - theta[1];
    z[2] = y[1] * y[2] - theta[2];
    return z;
  }
  vector system_old(vector y, vector theta, data array[] real x_r, array[] int x_i) {
    return system(y, theta);
  }
}
transformed data {
  vector[2] y_guess = [1, 1]';
  array[0] real x_r;
  array[0] int x_i;
}
parameters {
  vector<lower=0.5, upper=2>[2] theta;
}
transformed parameters {
  vector[2] y1 = solve_newton(system, y_guess, theta);
  vector[2] y2 = solve_powell(system, y_guess, theta);
  vector[2] y3 = solve_newton_tol(system, y_guess, 1e-10, 1e-6, 100, theta);
  vector[2] y4 = solve_powell_tol(system, y_guess, 1e-10, 1e-6, 100, theta);
  vector[2] y5 = algebra_solver(system_old, y_guess, theta, x_r, x_i);
}
model {
  y1 ~ normal(1, 0.5);
  theta ~ normal(1, 1);
}
