"""Density programs (:mod:`pemc_stan.modes.density`): what is built (nothing compiles)."""

from __future__ import annotations

import numpy as np
import pytest

from pemc_stan.modes.density import density_program
from pemc_stan.run.evidence import parameter_names

PROGRAM = """
data { int N; vector[N] y; }
parameters { real mu; real<lower=0> sigma; }
model { mu ~ normal(0, 1); sigma ~ exponential(1); y ~ normal(mu, sigma); }
generated quantities { real y_rep = normal_rng(mu, sigma); }
"""


def test_density_program_outputs_the_full_log_density() -> None:
    from pemc_stan.stan.parser import parse

    code = density_program(PROGRAM)
    prog = parse(code)  # valid Stan (stanc accepts it)
    assert prog.model is None and prog.transformed_parameters is None
    assert "real pemc_log_gamma = pemc_log_density(mu, sigma, y);" in code
    assert "normal_rng" not in code
    assert parameter_names(PROGRAM) == ["mu", "sigma"]


def _wide_draws(n: int, seed: int, found: int = 2
                ) -> tuple[object, list, np.ndarray, np.ndarray, float]:
    """Draws of the wide sampler's proposal around the first ``found`` modes of a target
    with three, N((0, 0), 0.1^2 I), N((3, 0), 0.1^2 I) and N((0, 3), 0.1^2 I) of mass 1
    each (the search missed the others): (base, modes, z, log weights, log Z found)."""
    from scipy import stats

    from pemc_stan.core.base_density import BaseDensity
    from pemc_stan.modes.wide import _proposal

    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 3.0]])
    base = BaseDensity(np.array([1.5, 0.0]), np.diag([2.25, 1.0]), "dense")
    modes = [(0.0, centres[k], 0.01 * np.eye(2)) for k in range(found)]
    parts, log_w = _proposal(base, modes)
    counts = rng.multinomial(n, np.exp(log_w))
    z = np.concatenate([q.sample_z(int(m), rng) for q, m in zip(parts, counts, strict=True)])
    log_q = np.logaddexp.reduce([q.log_density_z(z) + w for q, w in zip(parts, log_w,
                                                                         strict=True)], axis=0)
    log_gamma = np.logaddexp.reduce([stats.multivariate_normal(c, 0.01 * np.eye(2)).logpdf(z)
                                     for c in centres], axis=0)
    return base, modes, z, log_gamma - log_q, float(np.log(found))


def test_the_wide_proposal_is_half_the_found_modes_and_unbiased() -> None:
    """The defensive mixture: the covering Gaussians weigh one half, the modes' fitted
    Gaussians the other; its importance estimate of Z is the whole target's (3, with the
    mode the search missed), with weights bounded where the found modes hold the mass."""
    from pemc_stan.modes.wide import WIDE_SPREADS, _proposal

    base, modes, z, lw, _ = _wide_draws(200_000, 1)
    parts, log_w = _proposal(base, modes)
    assert len(parts) == len(WIDE_SPREADS) + 2
    assert np.exp(log_w[len(WIDE_SPREADS):]).sum() == pytest.approx(0.5)
    assert np.exp(log_w).sum() == pytest.approx(1.0)
    w = np.exp(lw)
    assert w.mean() == pytest.approx(3.0, abs=4 * w.std() / np.sqrt(w.size))
    found = np.linalg.norm(z - [0.0, 3.0], axis=1) > 1.0  # away from the missed mode
    # gamma / Z_found over half the modes' mixture: at most 2 * 1.25^2 (at a centre)
    assert w[found].max() / 2.0 < 2 * 1.25**2 + 0.01


def test_unexplained_starts_lie_in_the_mode_the_search_missed() -> None:
    from pemc_stan.modes.wide import UNEXPLAINED_STARTS, unexplained_starts

    base, modes, z, lw, log_z = _wide_draws(100_000, 2)
    starts = unexplained_starts(z, lw, log_z, base, modes, np.random.default_rng(0))
    assert starts.shape == (UNEXPLAINED_STARTS, 2)
    assert np.all(np.linalg.norm(starts - [0.0, 3.0], axis=1) < 0.5)
    assert len({tuple(s) for s in starts}) == UNEXPLAINED_STARTS  # without replacement
    # with every mode found nothing is unexplained
    base, every, z, lw, log_z = _wide_draws(100_000, 3, found=3)
    none = unexplained_starts(z, lw, log_z, base, every, np.random.default_rng(0))
    assert none.shape == (0, 2)
    assert unexplained_starts(z, lw, log_z, base, [], np.random.default_rng(0)).shape == (0, 2)
