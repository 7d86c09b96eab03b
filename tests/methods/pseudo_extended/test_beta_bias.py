"""The bias of g fitted from a first PE round (``beta_marginal="length"``), on exact draws.

Base tempering of a 1-D Gaussian target towards a N(0, 1) base: every tempered density
``q(x | beta) ∝ b(x)^(1 - beta) gamma~(x)^beta`` is Gaussian, so ``Z~(beta)`` and the
spread of ``Delta`` along the bridge are computed by quadrature, and iid draws of the
extended target (eq 8 with ``pi = g`` uniform) are drawn exactly: the carrier ``I`` is
uniform, ``x_I`` follows the target and ``beta_I`` ``g``; the other copies follow ``q``.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy.special import logsumexp

from pemc_stan.core.base_density import BaseDensity
from pemc_stan.methods.pseudo_extended.fit import PseudoExtendedFit
from pemc_stan.methods.tempering import FLAT, UNIFORM_SHARE
from pemc_stan.run.pipeline import transform_result

MEAN, SD, LOG_Z, OFFSET = 3.0, 0.5, 2.0, 0.7  # target Z N(3, 0.5^2); log Z^ = LOG_Z + OFFSET
X = np.linspace(-8.0, 10.0, 4001)
BETA = np.linspace(0.0, 1.0, 1001)


def _log_b(x: NDArray[np.float64]) -> NDArray[np.float64]:
    return -0.5 * x**2 - 0.5 * np.log(2 * np.pi)


def _log_gamma(x: NDArray[np.float64]) -> NDArray[np.float64]:
    return LOG_Z - 0.5 * ((x - MEAN) / SD) ** 2 - np.log(SD) - 0.5 * np.log(2 * np.pi)


def _delta(x: NDArray[np.float64]) -> NDArray[np.float64]:
    return LOG_Z + OFFSET + _log_b(x) - _log_gamma(x)


def _exact() -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """log Z~(beta) - log Z~(0) and sd_beta(Delta) on BETA, by quadrature over X."""
    log_q = _log_b(X)[None, :] - BETA[:, None] * _delta(X)[None, :]
    dx = X[1] - X[0]
    log_z = logsumexp(log_q, axis=1) + np.log(dx)
    w = np.exp(log_q - logsumexp(log_q, axis=1, keepdims=True))
    m1 = w @ _delta(X)
    sd = np.sqrt(np.maximum(w @ _delta(X) ** 2 - m1**2, 0.0))
    return log_z - log_z[0], sd


def _extended_draws(n_draws: int, n: int, rng: np.random.Generator
                    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """iid draws (x, beta), shape (1, n_draws, n), of the PE extended target."""
    log_z, _ = _exact()
    cdf = np.cumsum(np.exp(log_z - log_z.max()))
    beta = np.interp(rng.uniform(0, cdf[-1], (n_draws, n)), cdf, BETA)
    prec = (1.0 - beta) + beta / SD**2
    x = (beta * MEAN / SD**2) / prec + rng.standard_normal((n_draws, n)) / np.sqrt(prec)
    carrier = rng.integers(0, n, n_draws)
    rows = np.arange(n_draws)
    x[rows, carrier] = MEAN + SD * rng.standard_normal(n_draws)
    beta[rows, carrier] = rng.uniform(0.0, 1.0, n_draws)
    return x[None], beta[None]


def _fit_of(x: NDArray[np.float64], beta: NDArray[np.float64]) -> PseudoExtendedFit:
    """A PseudoExtendedFit whose generated quantities are those of the exact draws."""
    fit = PseudoExtendedFit.__new__(PseudoExtendedFit)
    fit.log_scale, fit.bias = LOG_Z + OFFSET, FLAT
    tempered = _log_gamma(x) - _log_b(x)  # pemc_log_lik under base tempering
    log_w = (1.0 - beta) * (tempered - fit.log_scale)  # Theorem 2.1 with pi = g
    fit._gq = lambda name: {"pemc_log_lik": tempered}[name]  # type: ignore[method-assign]
    fit.normalised_weights = (  # type: ignore[method-assign]
        lambda: np.exp(log_w - logsumexp(log_w, axis=-1, keepdims=True)))
    return fit


def test_the_bias_from_the_copies_matches_the_exact_bridge() -> None:
    """The next round's bias is ``log Z~(beta) - log pi(beta)`` (up to a constant), with
    ``pi`` half uniform and half ``sd_beta(Delta) / L``: fitted from the copies that do
    not carry the weight (weight ``1 - W_i``), it matches the quadrature within 0.1 nats
    over the bridge.  Counting every copy as a draw of ``q`` (the carriers follow the
    target, not ``q``) misses by more than 0.5 nats."""
    rng = np.random.default_rng(20261127)
    x, beta = _extended_draws(20000, 3, rng)
    bias = _fit_of(x, beta).next_bias()
    log_z, sd = _exact()
    length = float(np.sum(0.5 * (sd[1:] + sd[:-1]) * np.diff(BETA)))
    log_pi = np.log((1 - UNIFORM_SHARE) * sd / length + UNIFORM_SHARE)
    exact = log_z - log_pi - (log_z[0] - log_pi[0])
    assert np.ptp(exact) > 2.0  # the uniform g is far from flat in beta here
    at = np.linspace(0.0, 1.0, 21)
    err = bias(at) - np.interp(at, BETA, exact)
    assert np.max(np.abs(err)) < 0.1, err.round(3)

    every_copy = _fit_of(x, beta)
    every_copy.normalised_weights = lambda: np.zeros_like(x)  # type: ignore[method-assign]
    wrong = every_copy.next_bias()(at) - np.interp(at, BETA, exact)
    assert np.max(np.abs(wrong)) > 0.5, wrong.round(3)


@pytest.mark.parametrize("option", [{"beta_marginal": "flat"}, {"beta": [0.2, 0.6, 1.0]},
                                    {"instrumental": (0.5, 1.0)}, {"temper": "posterior"},
                                    {"beta_prior": (2.0, 1.0)}, {"n_pseudo": 1}])
def test_the_bias_is_used_only_where_it_leaves_the_weights_unchanged(option: object) -> None:
    """The shaped g needs sampled temperatures, pi = g, a uniform g and no beta_min
    (likelihood or base tempering), and copies that do not carry the weight (N > 1): any
    other setting keeps the program unshaped."""
    program = ("data { int n; vector[n] y; } parameters { real mu; } "
               "model { mu ~ normal(0, 1); y ~ normal(mu, 1); }")
    shaped = transform_result(program, method="pe")
    assert shaped.shaped and shaped.temper == "base"
    assert "target += -pemc_beta_bias(pemc_beta[pemc_k], pemc_knots, pemc_bias);" in \
        shaped.stan_code
    data = shaped.data({"n": 1, "y": [0.0]}, log_scale=0.0,
                       base=BaseDensity(np.zeros(1), np.eye(1), "dense"))
    assert data["pemc_knots"] == [0.0, 1.0] and data["pemc_bias"] == [0.0, 0.0]  # h = 0
    assert isinstance(option, dict)
    other = transform_result(program, method="pe", **option)
    assert not other.shaped and "pemc_beta_bias" not in other.stan_code
