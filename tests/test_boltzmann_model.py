"""The Boltzmann machine relaxation in models/boltzmann_machine: generator and exact ground truth.

The 2^28 enumeration is not run here; its code is checked on small machines
against independent computations:

* the chunked, running-log-sum-exp enumeration against a one-shot brute force;
* log Z of the Stan model's density (eqs. 50/52) through the exact identity
  N(x; 0, I) prod cosh(q_i'x + b_i) / Z = sum_s P(s) N(x; Q's, I) at random points;
* log Z, E[x], Cov[x] against trapezoid quadrature of the continuous density in 2
  and 3 dimensions (spectrally accurate: the integrand is a sum of unit Gaussians);
* E[x], Cov[x] against 200 000 exact draws of the 2^10-component mixture, with
  tolerances of 5 Monte-Carlo standard errors;
* the mean-field base of the CT paper (fixed points, bounds <= exact log Z, the
  eq.-25 mixture moments against enumeration of each factorised q);
* one compiled check that the Stan model's density with all constants
  (``pemc_log_density``, and ``log_prob`` plus the D/2 log 2 pi it drops) equals the
  NumPy density to 1e-8 on the shipped 28-unit machine.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import cmdstanpy
import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import chi2 as gen_chi2

ROOT = Path(__file__).resolve().parents[1]
MODEL_DIR = ROOT / "models" / "boltzmann_machine"


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("boltzmann_generate_data",
                                                  MODEL_DIR / "generate_data.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


gen = _load_generator()


def _brute_force(A: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All states (rows) and their log weights s'As/2 + s'b, computed directly."""
    n = b.shape[0]
    states = np.array([[1.0 if (k >> j) & 1 else -1.0 for j in range(n)] for k in range(2**n)])
    log_w = np.array([0.5 * s @ A @ s + s @ b for s in states])
    return states, log_w


def test_generator_follows_appendix_b() -> None:
    m = gen.make_machine(12, seed=5)
    assert m.W.shape == (12, 12) and m.b.shape == (12,)
    np.testing.assert_array_equal(m.W, m.W.T)
    np.testing.assert_array_equal(np.diag(m.W), 0.0)
    lam = np.linalg.eigvalsh(m.W + np.diag(m.d))
    assert abs(lam[0]) < 1e-10 and lam[1] > 1e-6, lam  # PSD with exactly one zero eigenvalue
    assert m.Q.shape == (12, 11)
    np.testing.assert_allclose(m.Q @ m.Q.T, m.W + np.diag(m.d), atol=1e-12)
    # columns by decreasing eigenvalue
    norms = np.sum(m.Q**2, axis=0)
    assert np.all(np.diff(norms) <= 1e-12)
    # the eq. (46) optimisation beats the plain shift d = -lambda_min(W) 1
    assert lam[-1] < np.ptp(np.linalg.eigvalsh(m.W)) - 1e-3
    again = gen.make_machine(12, seed=5)
    np.testing.assert_array_equal(again.Q, m.Q)
    assert not np.allclose(gen.make_machine(12, seed=6).W, m.W)


def test_generate_weights_eigenvalues() -> None:
    rng_seed = 11
    W, b = gen.generate_weights(28, rng_seed)
    # reconstruct V: its off-diagonal is W; its eigenvalues are 6 tanh(2 n_i) ∈ (-6, 6)
    # and, by construction, V has trace sum(e) so W + diag(V) must be recovered exactly
    rng = np.random.default_rng(rng_seed)
    R = gen.ortho_group.rvs(28, random_state=rng)
    e = 6.0 * np.tanh(2.0 * rng.standard_normal(28))
    V = (R * e) @ R.T
    np.testing.assert_allclose(W + np.diag(np.diag(V)), V, atol=1e-12)
    assert np.all(np.abs(e) < 6.0)
    # b ~ N(0, 0.1^2): 28 draws, sample variance within the central 99.9% chi-square band
    lo, hi = gen_chi2.ppf([0.0005, 0.9995], 27) / 27
    assert lo < np.var(b, ddof=1) / 0.1**2 < hi


@pytest.mark.parametrize("low_bits,chunk_rows", [(3, 5), (10, 1), (4, 1000)])
def test_enumeration_matches_brute_force(low_bits: int, chunk_rows: int) -> None:
    m = gen.make_machine(10, seed=3)
    A = m.Q @ m.Q.T
    states, log_w = _brute_force(A, m.b)
    log_norm = logsumexp(log_w)
    p = np.exp(log_w - log_norm)
    mom = gen.enumerate_boltzmann(A, m.b, low_bits=low_bits, chunk_rows=chunk_rows)
    assert mom.log_norm == pytest.approx(log_norm, abs=1e-11)
    np.testing.assert_allclose(mom.mean, p @ states, atol=1e-12)
    np.testing.assert_allclose(mom.second, (states.T * p) @ states, atol=1e-12)


def test_eq52_relation_with_w() -> None:
    """log Z (eq. 52) = log Z_B + Tr(D)/2 + D/2 log 2pi - D_B log 2, Z_B from W itself."""
    m = gen.make_machine(10, seed=4)
    truth = gen.ground_truth(m.Q, m.b)
    _, log_w = _brute_force(m.W, m.b)
    log_zb = logsumexp(log_w)
    assert truth.log_z_boltzmann == pytest.approx(log_zb, abs=1e-10)
    expected = log_zb + 0.5 * m.d.sum() + 0.5 * m.dim * math.log(2 * math.pi) - 10 * math.log(2)
    assert truth.log_z_phi == pytest.approx(expected, abs=1e-10)
    assert truth.log_z == pytest.approx(expected - 0.5 * m.dim * math.log(2 * math.pi), abs=1e-10)


def test_log_z_through_mixture_identity() -> None:
    """exp(log_density(x) - log Z) equals the 2^D_B-component mixture density at any x."""
    m = gen.make_machine(10, seed=7)
    truth = gen.ground_truth(m.Q, m.b)
    states, log_w = _brute_force(m.Q @ m.Q.T, m.b)
    log_p = log_w - logsumexp(log_w)
    means = states @ m.Q  # (2^D_B, D): Q's for every s
    rng = np.random.default_rng(0)
    x = means[rng.integers(0, len(means), 20)] + rng.normal(size=(20, m.dim)) * 1.5
    x[0] = 0.0
    diff = x[:, None, :] - means[None, :, :]
    log_mix = logsumexp(log_p[None, :] - 0.5 * np.sum(diff**2, axis=-1), axis=1) \
        - 0.5 * m.dim * math.log(2 * math.pi)
    np.testing.assert_allclose(gen.log_density(x, m.Q, m.b) - truth.log_z, log_mix,
                               rtol=0, atol=1e-10)


@pytest.mark.parametrize("n_units,seed,h", [(3, 1, 0.4), (4, 2, 0.45)])
def test_ground_truth_against_quadrature(n_units: int, seed: int, h: float) -> None:
    """Trapezoid rule on a grid (exponentially accurate for sums of unit Gaussians)."""
    m = gen.make_machine(n_units, seed=seed)
    dim = m.dim
    assert dim == n_units - 1
    truth = gen.ground_truth(m.Q, m.b)
    half = np.abs(gen._states(n_units) @ m.Q).max() + 11.0
    axis = np.arange(-half, half + h / 2, h)
    grid = np.stack(np.meshgrid(*([axis] * dim), indexing="ij"), axis=-1).reshape(-1, dim)
    log_f = gen.log_density(grid, m.Q, m.b)
    log_z = logsumexp(log_f) + dim * math.log(h)
    w = np.exp(log_f - logsumexp(log_f))
    mean = w @ grid
    centred = grid - mean
    cov = (centred.T * w) @ centred
    assert log_z == pytest.approx(truth.log_z, abs=1e-9)
    np.testing.assert_allclose(mean, truth.mean, atol=1e-9)
    np.testing.assert_allclose(cov, truth.cov, atol=1e-9)


def test_moments_against_exact_mixture_draws() -> None:
    """200 000 exact draws: s ~ P(s) by brute force, x = Q's + N(0, I); 5-SE tolerances."""
    m = gen.make_machine(10, seed=8)
    truth = gen.ground_truth(m.Q, m.b)
    states, log_w = _brute_force(m.Q @ m.Q.T, m.b)
    p = np.exp(log_w - logsumexp(log_w))
    rng = np.random.default_rng(2024)
    n = 200_000
    s = states[rng.choice(len(states), size=n, p=p)]
    x = s @ m.Q + rng.standard_normal((n, m.dim))
    mean = x.mean(axis=0)
    se_mean = x.std(axis=0, ddof=1) / math.sqrt(n)
    z_mean = (mean - truth.mean) / se_mean
    assert np.max(np.abs(z_mean)) < 5.0, z_mean
    c = x - truth.mean
    prods = c[:, :, None] * c[:, None, :]
    cov = prods.mean(axis=0)
    se_cov = prods.std(axis=0, ddof=1) / math.sqrt(n)
    z_cov = (cov - truth.cov) / se_cov
    assert np.max(np.abs(z_cov)) < 5.0, z_cov
    # the +I of eq. (54) and the multimodality both matter at this sample size
    assert np.min(np.abs(np.diag(cov) - np.diag(truth.cov) + 1.0) / np.diag(se_cov)) > 5.0


def test_shipped_files_are_consistent() -> None:
    data, truth = gen.load()
    meta = json.loads(gen.GROUND_TRUTH_FILE.read_text())
    assert data["D_B"] == 28 and data["D"] == 27 == meta["D"]
    Q = np.asarray(data["Q"])
    b = np.asarray(data["b"])
    assert Q.shape == (28, 27) and b.shape == (28,)
    W, d = np.asarray(meta["W"]), np.asarray(meta["d"])
    np.testing.assert_allclose(Q @ Q.T, W + np.diag(d), atol=1e-12)
    regenerated_W, regenerated_b = gen.generate_weights(28, meta["seed"])
    # W comes out of a random orthogonal matrix and matrix products: LAPACK/BLAS builds on
    # different CPUs agree to rounding (seen: 3e-15), not bit for bit
    np.testing.assert_allclose(regenerated_W, W, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(regenerated_b, b)
    assert truth.mean.shape == (27,) and truth.cov.shape == (27, 27)
    assert np.all(np.linalg.eigvalsh(truth.cov) >= 1.0 - 1e-9)  # Q'Cov[s]Q + I
    assert truth.log_z == pytest.approx(
        truth.log_z_boltzmann + 0.5 * d.sum() - 28 * math.log(2), abs=1e-8)


@pytest.mark.compiled
def test_stan_density_matches_numpy(
    compiled: Callable[..., cmdstanpy.CmdStanModel], tmp_path: Path,
) -> None:
    from pemc_stan.stan.logdensity import add_log_density_functions, log_density_functions
    from pemc_stan.stan.parser import parse
    from pemc_stan.stan.printer import print_program

    text = gen.STAN_FILE.read_text()
    program = parse(text, "boltzmann_machine.stan")
    call = log_density_functions(program).call("density")
    combined = (print_program(add_log_density_functions(program))
                + f"generated quantities {{\n  real pemc_check_total = {call};\n}}\n")
    model = compiled(combined, name="boltzmann_machine_check")
    data, _ = gen.load()
    Q, b = np.asarray(data["Q"]), np.asarray(data["b"])
    rng = np.random.default_rng(3)
    states = rng.choice([-1.0, 1.0], size=(4, 28))
    points = np.vstack([np.zeros(27), states @ Q + rng.standard_normal((4, 27))])
    expected = gen.log_density(points, Q, b)
    dropped = -0.5 * 27 * math.log(2 * math.pi)  # std_normal's constant, dropped by log_prob
    for i, x in enumerate(points):
        fit = model.sample(data=str(gen.DATA_FILE), fixed_param=True, chains=1,
                           iter_sampling=1, inits={"x": x.tolist()}, sig_figs=18, seed=1,
                           show_progress=False, output_dir=str(tmp_path))
        np.testing.assert_allclose(fit.stan_variable("x")[0], x, rtol=0, atol=1e-14)
        total = float(fit.stan_variable("pemc_check_total")[0])
        assert total == pytest.approx(expected[i], rel=1e-8, abs=1e-8)
        params = tmp_path / f"x{i}.json"
        params.write_text(json.dumps({"x": x.tolist()}))
        lp = float(model.log_prob(str(params), str(gen.DATA_FILE), jacobian=False,
                                  sig_figs=18)["lp__"].iloc[0])
        assert lp + dropped == pytest.approx(expected[i], rel=1e-8, abs=1e-8)


def test_mean_field_base_bounds_and_moments() -> None:
    """Mean-field fits (the CT paper's base): fixed points, ELBO <= exact, eq. (25) moments."""
    m = gen.make_machine(10, seed=9)
    truth = gen.ground_truth(m.Q, m.b)
    A = m.Q @ m.Q.T
    W0 = A - np.diag(np.diag(A))
    mf = gen.mean_field_base(m.Q, m.b, restarts=30, seed=1)
    states, log_w = _brute_force(A, m.b)
    exact = logsumexp(log_w) - 10 * math.log(2)
    assert exact == pytest.approx(truth.log_z, abs=1e-10)
    assert len(mf.bounds) >= 2  # the machine is multimodal
    for mag, bound in zip(mf.magnetisations, mf.bounds, strict=True):
        np.testing.assert_allclose(mag, np.tanh(W0 @ mag + m.b), atol=1e-8)
        assert bound <= exact + 1e-12
        # the bound is E_q[log weight] + H(q) for the product distribution q, by enumeration
        q = np.prod((1 + states * mag) / 2, axis=1)
        nz = q > 0
        direct = np.sum(q[nz] * (log_w[nz] - np.log(q[nz]))) - 10 * math.log(2)
        assert bound == pytest.approx(direct, abs=1e-9)
    assert mf.log_zeta == pytest.approx(logsumexp(mf.bounds), abs=1e-12)
    assert mf.log_zeta <= exact + math.log(len(mf.bounds))
    # eq. (25) moments: mixture over k (weights exp(l_k)/zeta) of the relaxation of q_k,
    # computed here by enumerating each q_k(s) exactly
    w = np.exp(mf.bounds - mf.log_zeta)
    mean = np.zeros(m.dim)
    second = np.zeros((m.dim, m.dim))
    for wk, mag in zip(w, mf.magnetisations, strict=True):
        q = np.prod((1 + states * mag) / 2, axis=1)
        mu_s = states @ m.Q
        mean += wk * (q @ mu_s)
        second += wk * ((mu_s.T * q) @ mu_s + np.eye(m.dim))
    np.testing.assert_allclose(mf.mean, mean, atol=1e-10)
    np.testing.assert_allclose(mf.cov, second - np.outer(mean, mean), atol=1e-9)
