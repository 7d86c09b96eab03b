"""The Gaussian-mixture relaxation of a Boltzmann machine, with exact ground truth.

Graham & Storkey (2017), appendix B. A Boltzmann machine on s in {-1, +1}^{D_B},

    P(s) = exp(s'Ws / 2 + s'b) / Z_B                                   (eq. 44)

(W symmetric with zero diagonal) is relaxed with a Gaussian auxiliary variable
x | s ~ N(Q's, I) (eq. 45), where Q is a D_B x D matrix with QQ' = W + diag(d)
for a diagonal d making W + diag(d) positive semi-definite. Marginalising s
gives a mixture of 2^{D_B} unit-covariance Gaussians (eq. 50)

    p(x) ∝ exp(-x'x / 2) prod_i cosh(q_i'x + b_i).

The parameters are generated as in the paper: R Haar-random orthogonal,
e_i = 6 tanh(2 n_i) with n_i ~ N(0, 1), V = R diag(e) R', W = V with its
diagonal zeroed, b_i ~ N(0, 0.1^2). The diagonal d approximately solves the
semi-definite programme of eq. (46), min_d lambda_max(W + diag d) subject to
W + diag d >= 0: because adding c I shifts every eigenvalue by c, that is the
unconstrained convex problem of minimising the eigenvalue spread
lambda_max - lambda_min (solved with a smoothed spread and L-BFGS) followed by the
shift d <- d - lambda_min, which leaves exactly one zero eigenvalue, so Q has
D = D_B - 1 columns (27 for the 28-unit machine, as in the paper).

The Stan model (``boltzmann_machine.stan``) writes the density as

    x ~ std_normal();  target += sum(log cosh(Q x + b));

so its full density, constants included, is N(x; 0, I) prod_i cosh(q_i'x + b_i)
and its normalising constant is

    log Z_stan = log sum_s exp(s'QQ's / 2 + s'b) - D_B log 2
               = log Z_B + Tr(diag d) / 2 - D_B log 2,

i.e. eq. (52) minus D/2 log(2 pi) (eq. 52 normalises exp(-phi) of eq. 51, which has
no 1/(2 pi)^{D/2}). The moments are E[x] = Q'E[s] (eq. 53) and
Cov[x] = Q'Cov[s]Q + I (from eq. 54). log Z_B, E[s] and E[ss'] are computed by
enumerating all 2^{D_B} states in float64 with a running log-sum-exp.

``python generate_data.py --seed 1`` writes ``boltzmann_machine.data.json`` (the
Stan data: D_B, D, Q, b) and ``ground_truth.json`` (log Z of the Stan model, log
Z_B, eq. 52's log Z, E[x], Cov[x], the generating W, d and seed).
``mean_field_base`` builds the CT paper's base density for this model (section 6,
eq. 25: a Gaussian moment-matched to a mixture of mean-field fits, with log zeta
from their bounds; no enumeration). The functions are importable by path (the
tests and the benchmarks load this file with importlib).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import minimize
from scipy.special import logsumexp
from scipy.stats import ortho_group

logger = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
DATA_FILE = HERE / "boltzmann_machine.data.json"
GROUND_TRUTH_FILE = HERE / "ground_truth.json"
STAN_FILE = HERE / "boltzmann_machine.stan"

#: Units enumerated at once in the inner (vectorised) dimension.
_LOW_BITS = 14
#: Rows of high-bit states per vectorised chunk (chunk = rows x 2^_LOW_BITS).
_CHUNK_ROWS = 256


@dataclass(frozen=True)
class Machine:
    """A Boltzmann machine and its Gaussian relaxation.

    Attributes
    ----------
    W
        (D_B, D_B) symmetric weights with zero diagonal.
    b
        (D_B,) biases.
    d
        (D_B,) diagonal making W + diag(d) positive semi-definite (rank D_B - 1).
    Q
        (D_B, D) with QQ' = W + diag(d), columns by decreasing eigenvalue.
    seed
        Seed of the generator, or None.
    """

    W: NDArray[np.float64]
    b: NDArray[np.float64]
    d: NDArray[np.float64]
    Q: NDArray[np.float64]
    seed: int | None = None

    @property
    def n_units(self) -> int:
        """D_B, the number of binary units."""
        return int(self.b.shape[0])

    @property
    def dim(self) -> int:
        """D, the dimension of x."""
        return int(self.Q.shape[1])

    def stan_data(self) -> dict[str, Any]:
        """The data of ``boltzmann_machine.stan``."""
        return {"D_B": self.n_units, "D": self.dim, "Q": self.Q.tolist(), "b": self.b.tolist()}


@dataclass(frozen=True)
class BoltzmannMoments:
    """Exact moments of a Boltzmann machine P(s) ∝ exp(s'As / 2 + s'b).

    Attributes
    ----------
    log_norm
        log sum_s exp(s'As / 2 + s'b).
    mean
        E[s], shape (D_B,).
    second
        E[ss'], shape (D_B, D_B).
    """

    log_norm: float
    mean: NDArray[np.float64]
    second: NDArray[np.float64]


@dataclass(frozen=True)
class GroundTruth:
    """Exact normaliser and moments of the relaxation as written in the Stan model.

    Attributes
    ----------
    log_z
        log of the integral of the Stan model's full density N(x; 0, I) prod cosh(q_i'x + b_i).
    log_z_boltzmann
        log Z_B of eq. (44).
    log_z_phi
        log Z of eq. (52) (normaliser of exp(-phi(x)), eq. 51).
    mean
        E[x], shape (D,).
    cov
        Cov[x], shape (D, D).
    """

    log_z: float
    log_z_boltzmann: float
    log_z_phi: float
    mean: NDArray[np.float64]
    cov: NDArray[np.float64]


def generate_weights(n_units: int, seed: int, scale: float = 6.0, steepness: float = 2.0,
                     bias_sd: float = 0.1) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """W and b as in appendix B (Haar R, e_i = scale * tanh(steepness * n_i)).

    Parameters
    ----------
    n_units
        D_B (at least 2).
    seed
        Seed of ``numpy.random.default_rng``.
    scale, steepness
        s_1 and s_2 of the paper (6 and 2).
    bias_sd
        Standard deviation of the biases (0.1).

    Returns
    -------
    (W, b)

    Raises
    ------
    ValueError
        If ``n_units < 2``.
    """
    if n_units < 2:
        raise ValueError(f"n_units={n_units!r}: expected an integer >= 2")
    rng = np.random.default_rng(seed)
    R = ortho_group.rvs(n_units, random_state=rng)
    e = scale * np.tanh(steepness * rng.standard_normal(n_units))
    V = (R * e) @ R.T
    W = 0.5 * (V + V.T)
    np.fill_diagonal(W, 0.0)
    b = bias_sd * rng.standard_normal(n_units)
    return W, b


def _smoothed_spread(d: NDArray[np.float64], W: NDArray[np.float64],
                     tau: float) -> tuple[float, NDArray[np.float64]]:
    lam, U = np.linalg.eigh(W + np.diag(d))
    hi = logsumexp(lam / tau)
    lo = logsumexp(-lam / tau)
    w_hi = np.exp(lam / tau - hi)
    w_lo = np.exp(-lam / tau - lo)
    grad = (U**2) @ (w_hi - w_lo)
    return float(tau * (hi + lo)), grad


def relaxation_diagonal(W: NDArray[np.float64]) -> NDArray[np.float64]:
    """Diagonal d approximately solving eq. (46), shifted so lambda_min(W + diag d) = 0.

    Parameters
    ----------
    W
        Symmetric (D_B, D_B) weights.

    Returns
    -------
    numpy.ndarray
        d such that W + diag(d) is positive semi-definite with smallest eigenvalue 0.

    Raises
    ------
    ValueError
        If ``W`` is not a symmetric square matrix.
    """
    W = np.asarray(W, dtype=float)
    if W.ndim != 2 or W.shape[0] != W.shape[1] or not np.allclose(W, W.T, atol=1e-12):
        raise ValueError(f"W of shape {W.shape}: expected a symmetric square matrix")
    d = -np.diag(W).copy()
    scale = float(np.max(np.abs(np.linalg.eigvalsh(W)))) or 1.0
    for tau in (1.0, 0.3, 0.1, 0.03, 0.01, 0.003):
        res = minimize(_smoothed_spread, d, args=(W, tau * scale), jac=True, method="L-BFGS-B",
                       options={"maxiter": 2000, "gtol": 1e-10})
        d = res.x
    lam_min = float(np.linalg.eigvalsh(W + np.diag(d))[0])
    return d - lam_min


def relaxation_factor(A: NDArray[np.float64], tol: float = 1e-9) -> NDArray[np.float64]:
    """Q with QQ' = A for a PSD A, dropping eigenvalues <= tol * lambda_max.

    Parameters
    ----------
    A
        Symmetric positive semi-definite matrix.
    tol
        Relative threshold below which an eigenvalue counts as zero.

    Returns
    -------
    numpy.ndarray
        (D_B, D) with columns ordered by decreasing eigenvalue.

    Raises
    ------
    ValueError
        If ``A`` has an eigenvalue below -tol * lambda_max (not PSD).
    """
    lam, U = np.linalg.eigh(np.asarray(A, dtype=float))
    lam, U = lam[::-1], U[:, ::-1]
    cut = tol * lam[0]
    if lam[-1] < -cut:
        raise ValueError(f"matrix has eigenvalue {lam[-1]:.3g} < 0: expected positive semi-definite")
    keep = lam > cut
    return U[:, keep] * np.sqrt(lam[keep])


def make_machine(n_units: int = 28, seed: int = 1) -> Machine:
    """Generate a machine and its relaxation (appendix B).

    Parameters
    ----------
    n_units
        D_B.
    seed
        Generator seed.

    Returns
    -------
    Machine

    Raises
    ------
    ValueError
        If ``n_units < 2``.
    """
    W, b = generate_weights(n_units, seed)
    d = relaxation_diagonal(W)
    Q = relaxation_factor(W + np.diag(d))
    return Machine(W=W, b=b, d=d, Q=Q, seed=seed)


def _states(n: int) -> NDArray[np.float64]:
    """All 2^n sign vectors as a (2^n, n) array (bit j of the row index -> column j)."""
    if n == 0:
        return np.zeros((1, 0))
    idx = np.arange(2**n, dtype=np.int64)[:, None]
    return np.where((idx >> np.arange(n)) & 1, 1.0, -1.0)


def enumerate_boltzmann(A: NDArray[np.float64], b: NDArray[np.float64],
                        low_bits: int = _LOW_BITS, chunk_rows: int = _CHUNK_ROWS,
                        ) -> BoltzmannMoments:
    """Exact log-normaliser and first two moments of P(s) ∝ exp(s'As / 2 + s'b).

    All 2^{D_B} states are enumerated: s = (s_hi, s_lo) with the low ``low_bits``
    units vectorised; chunks of ``chunk_rows`` high states are exponentiated relative
    to a running maximum (log-sum-exp), in float64.

    Parameters
    ----------
    A
        Symmetric (D_B, D_B) matrix (its diagonal only adds a constant to the energy).
    b
        (D_B,) biases.
    low_bits, chunk_rows
        Chunking (results do not depend on them beyond rounding).

    Returns
    -------
    BoltzmannMoments

    Raises
    ------
    ValueError
        If the shapes do not match or D_B > 40.
    """
    A = np.asarray(A, dtype=float)
    b = np.asarray(b, dtype=float)
    n = b.shape[0]
    if A.shape != (n, n):
        raise ValueError(f"A of shape {A.shape} and b of length {n}: expected A of shape ({n}, {n})")
    if n > 40:
        raise ValueError(f"D_B={n}: enumeration of 2^{n} states is infeasible; expected D_B <= 40")
    n_lo = min(n, low_bits)
    n_hi = n - n_lo
    lo, hi = slice(0, n_lo), slice(n_lo, n)
    S_lo = _states(n_lo)
    S_hi = _states(n_hi)
    e_lo = 0.5 * np.einsum("ki,ij,kj->k", S_lo, A[lo, lo], S_lo) + S_lo @ b[lo]
    e_hi = 0.5 * np.einsum("ki,ij,kj->k", S_hi, A[hi, hi], S_hi) + S_hi @ b[hi]
    A_hl = A[hi, lo]

    m = -np.inf
    z = 0.0
    s1 = np.zeros(n)
    s2 = np.zeros((n, n))
    for start in range(0, S_hi.shape[0], chunk_rows):
        Sh = S_hi[start:start + chunk_rows]
        E = (Sh @ A_hl) @ S_lo.T
        E += e_hi[start:start + chunk_rows, None]
        E += e_lo[None, :]
        m_chunk = float(E.max())
        if m_chunk > m:
            rescale = math.exp(m - m_chunk) if np.isfinite(m) else 0.0
            z *= rescale
            s1 *= rescale
            s2 *= rescale
            m = m_chunk
        E -= m
        np.exp(E, out=E)
        r = E.sum(axis=1)
        c = E.sum(axis=0)
        z += float(r.sum())
        s1[hi] += Sh.T @ r
        s1[lo] += S_lo.T @ c
        s2[hi, hi] += Sh.T @ (r[:, None] * Sh)
        s2[lo, lo] += S_lo.T @ (c[:, None] * S_lo)
        cross = Sh.T @ (E @ S_lo)
        s2[hi, lo] += cross
        s2[lo, hi] += cross.T
    return BoltzmannMoments(log_norm=m + math.log(z), mean=s1 / z, second=s2 / z)


def ground_truth(Q: NDArray[np.float64], b: NDArray[np.float64], **chunking: int) -> GroundTruth:
    """Exact log Z, E[x] and Cov[x] of the relaxation written as in the Stan model.

    The enumeration uses A = QQ' (equal to W + diag d up to rounding), so the result
    is exact for the density evaluated with this Q.

    Parameters
    ----------
    Q
        (D_B, D) factor.
    b
        (D_B,) biases.
    **chunking
        ``low_bits`` / ``chunk_rows`` passed to :func:`enumerate_boltzmann`.

    Returns
    -------
    GroundTruth

    Raises
    ------
    ValueError
        As :func:`enumerate_boltzmann`.
    """
    Q = np.asarray(Q, dtype=float)
    b = np.asarray(b, dtype=float)
    n, dim = Q.shape
    A = Q @ Q.T
    mom = enumerate_boltzmann(A, b, **chunking)
    cov_s = mom.second - np.outer(mom.mean, mom.mean)
    log_z = mom.log_norm - n * math.log(2.0)
    log_z_b = mom.log_norm - 0.5 * float(np.trace(A))
    log_z_phi = log_z + 0.5 * dim * math.log(2.0 * math.pi)
    cov_x = Q.T @ cov_s @ Q + np.eye(dim)
    return GroundTruth(log_z=log_z, log_z_boltzmann=log_z_b, log_z_phi=log_z_phi,
                       mean=Q.T @ mom.mean, cov=0.5 * (cov_x + cov_x.T))


@dataclass(frozen=True)
class MeanFieldBase:
    """Gaussian base moment-matched to a mixture of mean-field approximations (CT paper, sec. 6).

    Attributes
    ----------
    mean, cov
        Moments of the mixture of eq. (25) in x.
    log_zeta
        log sum_k exp(l_k): l_k the mean-field lower bound on log Z (Stan density) of mode k.
    magnetisations
        (L, D_B) distinct mean-field solutions m_k = E_q[s].
    bounds
        (L,) the l_k.
    """

    mean: NDArray[np.float64]
    cov: NDArray[np.float64]
    log_zeta: float
    magnetisations: NDArray[np.float64]
    bounds: NDArray[np.float64]


def mean_field_bound(m: NDArray[np.float64], A: NDArray[np.float64],
                     b: NDArray[np.float64]) -> float:
    """Mean-field lower bound on log sum_s exp(s'As / 2 + s'b) at magnetisations m.

    E_q[s'As / 2 + s'b] + H(q) for the factorised q with E_q[s] = m.

    Raises
    ------
    ValueError
        If the shapes of ``m``, ``A`` and ``b`` do not agree.
    """
    if A.shape != (m.size, m.size) or b.shape != m.shape:
        raise ValueError(f"m {m.shape}, A {A.shape}, b {b.shape}: expected (n,), (n, n), (n,)")
    m = np.clip(m, -1.0, 1.0)
    Wz = A - np.diag(np.diag(A))
    p = np.clip((1.0 + m) / 2.0, 1e-300, 1.0)
    q = np.clip((1.0 - m) / 2.0, 1e-300, 1.0)
    entropy = -np.sum(np.where(p > 1e-300, p * np.log(p), 0.0) + np.where(q > 1e-300,
                                                                         q * np.log(q), 0.0))
    return float(0.5 * m @ Wz @ m + b @ m + 0.5 * np.trace(A) + entropy)


def mean_field_base(Q: NDArray[np.float64], b: NDArray[np.float64], restarts: int = 50,
                    seed: int = 0, sweeps: int = 500, tol: float = 1e-10,
                    distinct: float = 1e-3) -> MeanFieldBase:
    """The paper's base for this model: mixture of mean-field fits, moment-matched (eq. 25).

    Each restart runs coordinate-ascent mean field m_i <- tanh(sum_j W_ij m_j + b_i)
    (W = QQ' without its diagonal) from random magnetisations; duplicates (max
    |m - m'| < ``distinct``) are dropped. Solution k gives the Gaussian with the
    moments of its relaxation, mean Q'm_k and covariance Q' diag(1 - m_k^2) Q + I, and
    the bound l_k = ELBO_k - D_B log 2 on log Z of the Stan density. The mixture
    weights are exp(l_k) / zeta. Uses no enumeration.

    Parameters
    ----------
    Q, b
        Relaxation parameters.
    restarts
        Random initialisations.
    seed
        Seed of the initialisations.
    sweeps, tol
        Coordinate-ascent sweeps and convergence tolerance.
    distinct
        Distance below which two solutions are the same.

    Returns
    -------
    MeanFieldBase

    Raises
    ------
    ValueError
        If ``restarts < 1``.
    """
    if restarts < 1:
        raise ValueError(f"restarts={restarts!r}: expected an integer >= 1")
    Q = np.asarray(Q, dtype=float)
    b = np.asarray(b, dtype=float)
    n = b.shape[0]
    A = Q @ Q.T
    Wz = A - np.diag(np.diag(A))
    rng = np.random.default_rng(seed)
    sols: list[NDArray[np.float64]] = []
    for _ in range(restarts):
        m = rng.uniform(-1.0, 1.0, n)
        for _ in range(sweeps):
            old = m.copy()
            for i in range(n):
                m[i] = math.tanh(Wz[i] @ m + b[i])
            if np.max(np.abs(m - old)) < tol:
                break
        if not any(np.max(np.abs(m - s)) < distinct for s in sols):
            sols.append(m.copy())
    M = np.array(sols)
    bounds = np.array([mean_field_bound(m, A, b) for m in M]) - n * math.log(2.0)
    log_zeta = float(logsumexp(bounds))
    w = np.exp(bounds - log_zeta)
    means = M @ Q
    mean = w @ means
    second = np.zeros((Q.shape[1], Q.shape[1]))
    for wk, mk, muk in zip(w, M, means):
        second += wk * ((Q.T * (1.0 - mk**2)) @ Q + np.outer(muk, muk))
    cov = second + np.eye(Q.shape[1]) - np.outer(mean, mean)
    return MeanFieldBase(mean=mean, cov=0.5 * (cov + cov.T), log_zeta=log_zeta,
                         magnetisations=M, bounds=bounds)


def log_density(x: NDArray[np.float64], Q: NDArray[np.float64],
                b: NDArray[np.float64]) -> NDArray[np.float64]:
    """The Stan model's full log density: log N(x; 0, I) + sum_i log cosh(q_i'x + b_i).

    Parameters
    ----------
    x
        (..., D) points.
    Q, b
        Relaxation parameters.

    Returns
    -------
    numpy.ndarray
        Shape ``x.shape[:-1]``.

    Raises
    ------
    ValueError
        If the last axis of ``x`` is not D.
    """
    x = np.asarray(x, dtype=float)
    Q = np.asarray(Q, dtype=float)
    if x.shape[-1] != Q.shape[1]:
        raise ValueError(f"x has last dimension {x.shape[-1]}: expected D={Q.shape[1]}")
    u = x @ Q.T + b
    au = np.abs(u)
    log_cosh = au + np.log1p(np.exp(-2.0 * au)) - math.log(2.0)
    dim = Q.shape[1]
    return (-0.5 * np.sum(x * x, axis=-1) - 0.5 * dim * math.log(2.0 * math.pi)
            + np.sum(log_cosh, axis=-1))


def load(data_file: str | Path = DATA_FILE,
         truth_file: str | Path = GROUND_TRUTH_FILE) -> tuple[dict[str, Any], GroundTruth]:
    """Read the Stan data and the ground truth written by :func:`main`.

    Raises
    ------
    FileNotFoundError
        If a file is missing (run ``python generate_data.py`` to write them).
    """
    data = json.loads(Path(data_file).read_text())
    t = json.loads(Path(truth_file).read_text())
    truth = GroundTruth(log_z=t["log_z"], log_z_boltzmann=t["log_z_boltzmann"],
                        log_z_phi=t["log_z_phi"], mean=np.asarray(t["mean"]),
                        cov=np.asarray(t["cov"]))
    return data, truth


def write(machine: Machine, truth: GroundTruth, data_file: str | Path,
          truth_file: str | Path, seconds: float | None = None) -> None:
    """Write the Stan data and the ground truth as JSON (full float64 precision).

    Raises
    ------
    OSError
        If a file cannot be written.
    """
    Path(data_file).write_text(json.dumps(machine.stan_data()) + "\n")
    out: Mapping[str, Any] = {
        "seed": machine.seed,
        "D_B": machine.n_units,
        "D": machine.dim,
        "log_z": truth.log_z,
        "log_z_boltzmann": truth.log_z_boltzmann,
        "log_z_phi": truth.log_z_phi,
        "mean": truth.mean.tolist(),
        "cov": truth.cov.tolist(),
        "W": machine.W.tolist(),
        "d": machine.d.tolist(),
        "lambda_max": float(np.linalg.eigvalsh(machine.W + np.diag(machine.d))[-1]),
        "enumeration_seconds": seconds,
        "notes": ("log_z: normaliser of the Stan model's full density N(x;0,I) prod cosh(q_i'x+b_i) "
                  "(= eq. 52 minus D/2 log 2pi); log_z_phi: eq. 52; cov = Cov[x]."),
    }
    Path(truth_file).write_text(json.dumps(out) + "\n")


def main(argv: list[str] | None = None) -> None:
    """Command line: generate a machine, enumerate, write the JSON files.

    Raises
    ------
    SystemExit
        On invalid command-line arguments (argparse).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--units", type=int, default=28, help="D_B (default 28)")
    parser.add_argument("--data-file", type=Path, default=DATA_FILE)
    parser.add_argument("--truth-file", type=Path, default=GROUND_TRUTH_FILE)
    args = parser.parse_args(argv)
    machine = make_machine(args.units, args.seed)
    t0 = time.perf_counter()
    truth = ground_truth(machine.Q, machine.b)
    seconds = time.perf_counter() - t0
    write(machine, truth, args.data_file, args.truth_file, seconds)
    print(f"D_B={machine.n_units} D={machine.dim} seed={args.seed}: log Z (Stan density) = "
          f"{truth.log_z:.10f}, log Z_B = {truth.log_z_boltzmann:.10f}, eq. 52 log Z = "
          f"{truth.log_z_phi:.10f}; enumeration {seconds:.1f} s")
    print(f"lambda_max(W + D) = {np.linalg.eigvalsh(machine.W + np.diag(machine.d))[-1]:.4f} "
          f"(-lambda_min(W) shift would give "
          f"{np.ptp(np.linalg.eigvalsh(machine.W)):.4f})")


if __name__ == "__main__":
    main()
