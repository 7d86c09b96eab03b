"""Diagnostics shared by every fit: NUTS transition problems, and the fit's verdict.

Every fit judges itself (:meth:`pemc_stan.sampling.fit.ExtendedFit.check`): a
:class:`Verdict` is ``ok`` or ``suspect`` with named :class:`Reason` s, each saying
what is wrong (with the numbers) and what to do.  The checks use only evidence the
fit already has; their thresholds are the constants below.

NUTS transition problems shared by the pseudo-extended and tempered fits:

Both fit classes run CmdStan's NUTS on an extended target and report, besides
their method-specific diagnostics, the two things Stan itself flags about the
transitions: divergences (the sampler may be biased: the step size is too
large for some region) and trajectories stopped at ``max_treedepth`` (not a
bias, but each iteration then moves less than NUTS would have let it, which
on tempered multimodal targets means fewer moves between modes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from pemc_stan.estimators.convergence import convergence, ess_bulk, rhat_rank

__all__ = ["TREEDEPTH_WARN_SHARE", "TransitionCounts", "transition_counts", "treedepth_advice",
           "Reason", "Verdict", "RHAT_MAX", "ESS_MIN", "VARIANCE_SE_MAX", "DIVERGENT_SHARE_MAX",
           "rhat_and_ess", "convergence_stats", "CONVERGENCE_COLUMNS", "chains_disagree",
           "UNVISITED_SHARE_MIN", "UNVISITED_EXPECTED_MIN", "Note", "TREEDEPTH_SUSPECT_SHARE",
           "treedepth_reason", "leapfrog_gradients", "point_text"]

#: Largest rank-normalised split R-hat of the resampled draws of an ``ok`` fit.
RHAT_MAX = 1.05
#: Smallest bulk ESS of the resampled draws (and Kish ESS of the weights) of an ``ok`` fit.
ESS_MIN = 100.0
#: Largest Monte-Carlo standard error of a parameter's variance estimate, relative to it,
#: in an ``ok`` fit: its sd known to about a tenth, as ``ESS_MIN`` knows its mean to a
#: tenth of an sd.  A heavy-tailed marginal needs far more draws for the one than the
#: other (kurtosis 11: ``ESS_MIN`` draws give the variance to 32%).
VARIANCE_SE_MAX = 0.2
#: Largest share of divergent transitions of an ``ok`` fit.
DIVERGENT_SHARE_MAX = 0.01
#: Per-chain estimates that differ by more than this many combined standard errors disagree.
CHAIN_Z_MAX = 5.0
#: A mode the pilot found with at least this share of the mass it found must get at least
#: one effective draw's weight in the estimates (``unvisited_modes``) ...
UNVISITED_SHARE_MIN = 0.01
#: ... when, at the pilot's share and the estimates' ESS, it should hold at least this
#: many effective draws: a sampler that works leaves it with fewer than one with
#: probability at most 4 exp(-3), 20% (Poisson, mean 3: no draw or one), and about
#: exp(-3), 5%, for none; with fewer expected, an empty cell is no evidence of a miss.
UNVISITED_EXPECTED_MIN = 3.0


class Note(NamedTuple):
    """Something a run's pilot or search wants the user told (a fallback taken, a split
    refused): shown in the fit's diagnostics; the methods say which names are faults."""

    name: str
    message: str
    remedy: str


@dataclass(frozen=True)
class Reason:
    """Why a fit is suspect.

    Attributes
    ----------
    name
        A short identifier (``"rhat"``, ``"beta_round_trips"``, ...).
    message
        What is wrong, with the numbers.
    remedy
        What to do.
    note
        True for what the user must know but that does not make the fit suspect (a
        check whose evidence is itself unchecked): the verdict lists it among its notes.
    """

    name: str
    message: str
    remedy: str
    note: bool = False

    def __str__(self) -> str:
        return f"{self.name}: {self.message}; {self.remedy}"


@dataclass(frozen=True)
class Verdict:
    """A fit's judgement of itself: ``ok`` when no check found a problem.

    Attributes
    ----------
    reasons
        The problems found (empty when ``ok``).
    checks
        The names of the checks that were made.
    notes
        What a user must know of the estimates that does not make the fit suspect (an
        error bar its draws' tails make unreliable).
    """

    reasons: tuple[Reason, ...] = ()
    checks: tuple[str, ...] = ()
    notes: tuple[Reason, ...] = ()

    @property
    def ok(self) -> bool:
        """True when no check found a problem."""
        return not self.reasons

    @property
    def status(self) -> str:
        """``"ok"`` or ``"suspect"``."""
        return "ok" if self.ok else "suspect"

    def names(self) -> list[str]:
        """The names of the reasons."""
        return [r.name for r in self.reasons]

    def __str__(self) -> str:
        if self.ok:
            lines = [f"verdict: ok ({len(self.checks)} checks: {', '.join(self.checks)})"]
        else:
            lines = [f"verdict: SUSPECT ({len(self.reasons)} of {len(self.checks)} checks "
                     "failed)"]
            lines += [f"  - {r}" for r in self.reasons]
        lines += [f"  note: {r}" for r in self.notes]
        return "\n".join(lines)


def point_text(values: Mapping[str, Any], limit: int = 3) -> str:
    """A point of the user's parameters in a message, a few values: ``mu = 3.1, x[1] =
    0.0012, x[2] = -0.0031, ...`` (``values``: each parameter's value at the point).

    Raises
    ------
    Nothing.
    """
    out: list[str] = []
    for name, value in values.items():
        flat = np.asarray(value, dtype=float).reshape(-1)
        out.extend(f"{name}[{i + 1}] = {v:.3g}" if flat.size > 1 or np.ndim(value)
                   else f"{name} = {v:.3g}" for i, v in enumerate(flat))
    return ", ".join(out[:limit]) + (", ..." if len(out) > limit else "")


def rhat_and_ess(draws: NDArray[np.float64]) -> tuple[float, float]:
    """Rank-normalised split R-hat and bulk ESS of draws shaped (chains, draws).

    Returns (nan, nan) for constant draws.

    Raises
    ------
    Nothing.
    """
    x = np.asarray(draws, dtype=float)
    if not _assessable(x):
        return float("nan"), float("nan")
    return rhat_rank(x), ess_bulk(x)


#: The columns of :func:`convergence_stats` (and of ``ExtendedFit.convergence()``).
CONVERGENCE_COLUMNS = ("r_hat", "ess_bulk", "ess_tail")


def _assessable(x: NDArray[np.float64]) -> bool:
    """Draws (chains, draws) whose R-hat and ESS are defined: finite and not constant."""
    return x.ndim == 2 and bool(np.all(np.isfinite(x))) and bool(np.ptp(x) > 0)


def convergence_stats(draws: NDArray[np.float64]) -> tuple[float, float, float]:
    """Rank-normalised split R-hat, bulk ESS and tail ESS of draws shaped (chains, draws).

    The one computation behind both the verdict's R-hat and ESS checks and the
    summary table's ``r_hat``, ``ess_bulk`` and ``ess_tail`` (see
    ``ExtendedFit.convergence``), so the two always show the same numbers.

    Returns
    -------
    (r_hat, ess_bulk, ess_tail)
        NaN for constant or non-finite draws (as :func:`rhat_and_ess`).

    Raises
    ------
    Nothing.
    """
    x = np.asarray(draws, dtype=float)
    if not _assessable(x):
        return float("nan"), float("nan"), float("nan")
    return convergence(x)


def chains_disagree(estimates: NDArray[np.float64], std_errors: NDArray[np.float64]
                    ) -> float:
    """Largest standardised distance of a chain's estimate from the others' pooled one.

    For chain ``c`` with estimate ``m_c`` and standard error ``s_c`` and the
    inverse-variance mean ``m`` of the other chains with standard error ``s``,
    ``|m_c - m| / sqrt(s_c^2 + s^2)``; large values mean the chains saw
    different distributions (e.g. different modes).

    Raises
    ------
    Nothing (nan with fewer than two usable chains).
    """
    m = np.asarray(estimates, dtype=float)
    s = np.asarray(std_errors, dtype=float)
    ok = np.isfinite(m) & np.isfinite(s) & (s > 0)
    m, s = m[ok], s[ok]
    if m.size < 2:
        return float("nan")
    worst = 0.0
    for c in range(m.size):
        others = np.arange(m.size) != c
        w = 1.0 / s[others] ** 2
        pooled = float(np.sum(w * m[others]) / np.sum(w))
        se = float(np.sqrt(1.0 / np.sum(w)))
        worst = max(worst, abs(m[c] - pooled) / float(np.hypot(s[c], se)))
    return worst

#: Share of transitions at ``max_treedepth`` above which the fits advise a deeper tree.
TREEDEPTH_WARN_SHARE = 0.01
#: Share above which the verdict is suspect: a tenth of the moves cut short is where a
#: tempered run loses its moves between modes, which R-hat over four chains can miss
#: (docs/decisions.md).
TREEDEPTH_SUSPECT_SHARE = 0.1


@dataclass(frozen=True)
class TransitionCounts:
    """Counts over all chains' sampling transitions.

    ``max_treedepth`` is None when the fit does not record it (then
    ``max_treedepth_hits`` is 0).
    """

    transitions: int
    divergences: int
    max_treedepth: int | None
    max_treedepth_hits: int


def _max_treedepth(fit: Any) -> int | None:
    """``max_depth`` of the run, as cmdstanpy parsed it from the Stan CSV header."""
    try:
        return int(fit.metadata.cmdstan_config["max_depth"])
    except (AttributeError, KeyError, TypeError, ValueError):
        return None


def leapfrog_gradients(steps: NDArray[np.float64], config: Mapping[str, Any]) -> int:
    """Gradient evaluations of a NUTS run from its saved ``n_leapfrog__`` (draws, chains)
    and its CmdStan config: the sampling iterations' steps (times ``thin``) plus the
    warm-up iterations at their mean
    (see :meth:`~pemc_stan.sampling.fit.ExtendedFit.run_gradients`).

    Raises
    ------
    Nothing.
    """
    steps = np.asarray(steps, dtype=float)
    if steps.size == 0:
        return 0
    warmup = int(config.get("num_warmup", 0) or 0)
    thin = max(int(config.get("thin", 1) or 1), 1)
    return int(round(float(np.sum(steps)) * thin + float(np.mean(steps)) * warmup
                     * steps.shape[1]))


def transition_counts(fit: Any, draws: NDArray[np.float64],
                      columns: Mapping[str, int]) -> TransitionCounts:
    """Divergences and max-treedepth hits of a NUTS run.

    Parameters
    ----------
    fit
        The ``cmdstanpy.CmdStanMCMC`` (only ``fit.metadata.cmdstan_config`` is
        read, for ``max_depth``; an object without it skips the tree-depth count).
    draws
        Sampling draws, shape ``(iterations, chains, columns)``.
    columns
        Column name -> index into the last axis of ``draws``.

    Returns
    -------
    TransitionCounts

    Raises
    ------
    ValueError
        If ``draws`` is not three-dimensional.
    """
    arr = np.asarray(draws)
    if arr.ndim != 3:
        raise ValueError(f"draws have shape {arr.shape}; expected (iterations, chains, columns)")
    transitions = int(arr.shape[0] * arr.shape[1])
    div = columns.get("divergent__")
    divergences = int(np.sum(arr[:, :, div] != 0)) if div is not None else 0
    depth = _max_treedepth(fit)
    tree = columns.get("treedepth__")
    hits = int(np.sum(arr[:, :, tree] >= depth)) if depth is not None and tree is not None else 0
    return TransitionCounts(transitions, divergences, depth, hits)


def treedepth_advice(counts: TransitionCounts) -> str | None:
    """The advice for trajectories cut short, or None when few were.

    Parameters
    ----------
    counts
        From :func:`transition_counts`.

    Returns
    -------
    str or None
        A message when more than :data:`TREEDEPTH_WARN_SHARE` of the
        transitions stopped at ``max_treedepth``.
    """
    if counts.max_treedepth is None or counts.transitions == 0:
        return None
    share = counts.max_treedepth_hits / counts.transitions
    if share <= TREEDEPTH_WARN_SHARE:
        return None
    return (f"{counts.max_treedepth_hits} of {counts.transitions} transitions "
            f"({100 * share:.1f}%) stopped at max_treedepth={counts.max_treedepth}: their "
            "trajectories were cut short, so each iteration moves less than NUTS would have "
            f"let it. Pass max_treedepth={counts.max_treedepth + 2} (each extra level can "
            "double the cost of an iteration).")


def treedepth_reason(counts: TransitionCounts, flat: Sequence[tuple[str, int]] = (),
                     kept: str = "") -> Reason | None:
    """The verdict's ``max_treedepth`` reason, or None when at most
    :data:`TREEDEPTH_SUSPECT_SHARE` of the transitions stopped at ``max_treedepth``.
    ``flat``: parameters the density uses only in comparisons, ``(name, line)``
    (:func:`~pemc_stan.stan.analysis.compared_only_parameters`), named as the likely cause;
    ``kept``: why pemc-stan did not sum them out itself
    (:func:`~pemc_stan.core.marginalise.refusal`).

    Raises
    ------
    Nothing.
    """
    if counts.max_treedepth is None or counts.transitions == 0:
        return None
    share = counts.max_treedepth_hits / counts.transitions
    if not share > TREEDEPTH_SUSPECT_SHARE:
        return None
    deeper = (f"pass max_treedepth={counts.max_treedepth + 2} (each level can double an "
              "iteration's cost), or a larger budget so that the follow-ups raise it")
    cause = ""
    if flat:
        where = ", ".join(f"{n} (line {line})" for n, line in flat)
        cause = (f"; the model uses {where} only in comparisons, so its density is flat "
                 "between the points where they change and HMC has no gradient to turn "
                 "a trajectory along it")
        deeper = ("marginalise it out (sum the density over the intervals between those "
                  "points, as the Stan User's Guide does for a change point"
                  + (f"; pemc-stan does this itself when it can, but not here: {kept}"
                     if kept else "") + "), or " + deeper)
    return Reason(
        "max_treedepth", f"{counts.max_treedepth_hits} of {counts.transitions} transitions "
        f"({100 * share:.0f}%) stopped at max_treedepth={counts.max_treedepth}: their "
        "trajectories were cut short, so the chains may not have crossed between modes or "
        "reached a mode's far regions" + cause, deeper)
