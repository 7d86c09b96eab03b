"""The mode split: separated modes sampled one by one, weighted by their masses.

When the pilot's search (:class:`~pemc_stan.modes.search.ModeSearch`) has found
the modes and NUTS cannot move between them, the posterior is the mixture of its
restrictions to the modes' cells,

    p(x) = sum_k (Z_k / Z) p_k(x),    Z = sum_k Z_k,

so NUTS chains that each stay in one cell sample the ``p_k``, bridge sampling on
each cell's chains gives ``log Z_k``
(:func:`~pemc_stan.modes.bridge.bridge_from_draws`), and every expectation and
``log Z`` follow without any chain crossing between modes.  This is what a
tempered chain cannot do when a mode is narrow: the geometric path
``gamma^beta b^(1 - beta)`` has an entropy barrier inside a narrow mode's cell (the
volume ratio of the base's scale to the mode's), which no beta bias fitted to all
modes together lifts (docs/validation.md, "Experiment: one NUTS chain per mode").

:func:`split_modes` runs the chains the user asked for from where CmdStan would start
them (scouts: a mode the search missed can catch one, whose draws then disagree with
their group's) and, when the search found several modes, :data:`CHAINS_PER_MODE` more
from each mode centre, all of the user's unchanged program with the user's ``iter_warmup`` and
``iter_sampling``.  Modes between which chains move are
merged into one group (:func:`cell_groups`: they are connected for NUTS and sampled
together), and the split is accepted only when the evidence says the decomposition
holds:

- the search stopped because it saw no sign of modes it missed
  (:data:`~pemc_stan.modes.search.UNSEEN_SHARE_MAX`);
- the fit's own verdict (:meth:`ModeSplitFit.check`) is ok: divergences, R-hat and
  ESS within each group's chains, the chains of a group agreeing, no mode the search
  found left unvisited or outside every group, every group's mass estimated (bridge
  sampling restricted to the group's cells, so no mass is counted twice), and within a
  group of connected modes no mode visited far less than the search weighed it (a spike
  in a slab).

A split refused only for mass no group holds (the wide importance sampler's excess)
searches again from where that mass is, and runs once more with the modes found
there (:func:`_split_extended`), up to :data:`MAX_EXTENSIONS` times within the
follow-up budget.  Otherwise the method
runs as it would have (tempering), and the reason is kept in its diagnostics.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import cmdstanpy
import numpy as np
import pandas as pd
from numpy.typing import NDArray
from scipy.special import logsumexp

from pemc_stan.backend.progress import stage
from pemc_stan.errors import PemcStanError
from pemc_stan.estimators import weights as W
from pemc_stan.estimators.log_z import EvidenceEstimate
from pemc_stan.estimators.mixture import (
    importance_error,
    mixture_log_z,
    mixture_mean,
    mixture_weights,
    unexplained_mass,
)
from pemc_stan.methods.base import (
    ExtendedFit,
    MethodModel,
    OutputExtras,
    WeightedEstimate,
    emit_warning,
    leapfrog_gradients,
)
from pemc_stan.methods.base_density import BaseDensity, coordinate_draws
from pemc_stan.methods.follow_up import (
    DEFAULT_BUDGET,
    PREDICTION_MARGIN,
    FollowUpStep,
    longer_can_fix,
)
from pemc_stan.modes.bridge import bridge_from_draws
from pemc_stan.modes.density import DensityEvaluator
from pemc_stan.modes.search import NEW_MODE_SHARE, UNSEEN_SHARE_MAX, ModeSearch
from pemc_stan.modes.wide import ModeGaussians, unexplained_starts, wide_log_weights
from pemc_stan.output.diagnostics import (
    RHAT_MAX,
    UNVISITED_SHARE_MIN,
    Reason,
    convergence_stats,
)

logger = logging.getLogger(__name__)

__all__ = ["CHAINS_PER_MODE", "LEFT_SHARE_MAX", "MAX_SPLIT_MODES", "OCCUPANCY_FACTOR",
           "OCCUPANCY_SHARE_MIN", "ModeSplitFit",
           "SplitOutcome", "cell_groups", "longer_can_fix", "split_modes", "try_split",
           "wide_resolution"]

#: Chains started at each mode centre: two, so that R-hat and the chains' agreement
#: can be judged within every mode.
CHAINS_PER_MODE = 2
#: Offset of the scouts' seed from the run's.
SCOUT_SEED_OFFSET = 15485863
#: The split is tried for at most this many modes (beyond, the modes are rarely all
#: separated, and the chains would cost more than tempering).
MAX_SPLIT_MODES = 24
#: A split refused for mass no group holds searches again from that mass at most this
#: many times (each within the follow-up budget).  Once was not always enough: on the
#: mixture on R^2 with one round of restarts (seed 1) the first search from the missed
#: mass found 4 of the 6 groups missing on one machine and all of them on another, and
#: the second split was refused for the rest.
MAX_EXTENSIONS = 2
#: A chain stayed in its cell when at most this share of its draws lie nearer another
#: cell's centre (draws in a wide mode's tail can be nearer a narrow neighbour's).
LEFT_SHARE_MAX = 0.01
#: A split refused only for these reasons (slow mixing within a group of modes) runs once
#: more, twice as long, from where its chains ended (:func:`_run_longer`), when the
#: follow-up budget allows.
SPLIT_LONGER_REASONS = ("rhat", "ess", "chains_agree")
#: In a group of connected modes, a mode the search weighed at this share of the group or
#: more ...
OCCUPANCY_SHARE_MIN = 0.05
#: ... is under-visited when it holds less than that share divided by this of the
#: group's draws.
OCCUPANCY_FACTOR = 5.0
#: With several modes found, the split's masses are checked against importance sampling
#: from around the found modes (:func:`~pemc_stan.modes.wide.wide_log_weights`) in
#: batches (:data:`~pemc_stan.modes.wide.WIDE_DRAWS` draws each) ...
#: ... until the standard error of the mass they see beyond the groups' (a share of the
#: groups') is at most the lightest group's share over ``WIDE_EXCESS_Z + WIDE_POWER_Z``
#: (a missing mode as heavy as the lightest found is seen), within these bounds, at most
#: :data:`WIDE_BATCHES` batches ...  (With a fixed 0.02, one of the 20 modes of the
#: mixture on R^2, 5% of the mass, went unseen at 2.5 standard errors and a split with
#: log Z -0.05 +- 0.004 was judged ok.)
WIDE_SE_MAX = 0.02
WIDE_SE_MIN = 0.005
WIDE_BATCHES = 8
#: ... and the split is refused when that sampler sees more mass than the groups hold
#: by more than this many standard errors.
WIDE_EXCESS_Z = 4.0
#: A missing mode as heavy as the lightest found is then expected this many standard
#: errors above the threshold (seen with probability Phi(2) = 98%).  With the lightest
#: share over :data:`WIDE_EXCESS_Z` alone it was expected at the threshold and seen half
#: the time: the mixture on R^2, seed 3, missed a 5% mode and its split, log Z
#: -0.052 +- 0.0045, was judged ok with the excess at 3.97 standard errors.
WIDE_POWER_Z = 2.0
#: Offset of the wide sampler's seed from the run's.
WIDE_SEED_OFFSET = 32452843


def cell_groups(cells: NDArray[np.intp], n_cells: int
                ) -> tuple[NDArray[np.intp], NDArray[np.float64], list[list[int]]]:
    """Group the cells that chains move between, and the chains by their group.

    Every cell holding more than :data:`LEFT_SHARE_MAX` of a chain's draws joins one
    group with the chain's other such cells (NUTS moves between them, so they are
    sampled together), transitively; a chain belongs to the group of the cell holding
    most of its draws.  Where a chain started does not count: early warm-up, with its
    large steps, can throw a chain across a barrier it never crosses again.  Cells no
    chain stays in belong to no group: their mass is left out, so the verdict's
    ``mode_groups`` check fails when such a mode holds a material share.

    Parameters
    ----------
    cells
        The cell of every draw, shape (chains, draws), in ``0 .. n_cells - 1``.
    n_cells
        The number of cells.

    Returns
    -------
    (groups, outside, members)
        ``groups[c]``: chain ``c``'s group, numbered in order of their smallest cell;
        ``outside[c]``: the share of its draws outside its group's cells;
        ``members[g]``: the cells of group ``g``.

    Raises
    ------
    ValueError
        If a cell index is out of range.
    """
    labels = np.atleast_2d(np.asarray(cells, dtype=np.intp))
    if labels.size and (labels.min() < 0 or labels.max() >= n_cells):
        raise ValueError(f"cell indices must lie in 0..{n_cells - 1}")
    root = list(range(n_cells))

    def find(k: int) -> int:
        while root[k] != k:
            root[k] = root[root[k]]
            k = root[k]
        return k

    shares = np.stack([np.bincount(row, minlength=n_cells) / max(row.size, 1)
                       for row in labels])
    majority = np.argmax(shares, axis=1)
    for c, home in enumerate(majority):
        for k in np.flatnonzero(shares[c] > LEFT_SHARE_MAX):
            root[find(int(k))] = find(int(home))
    roots = {find(int(k)) for k in majority}
    smallest = sorted(min(k for k in range(n_cells) if find(k) == r) for r in roots)
    number = {find(k): g for g, k in enumerate(smallest)}
    cell_group = np.array([number.get(find(k), -1) for k in range(n_cells)], dtype=np.intp)
    groups = cell_group[majority]
    outside = np.array([float(np.sum(shares[c][cell_group != groups[c]]))
                        for c in range(len(groups))])
    members = [np.flatnonzero(cell_group == g).tolist() for g in range(len(smallest))]
    return groups, outside, members


def _group_stats(values: NDArray[np.float64], groups: NDArray[np.intp], n_groups: int
                 ) -> NDArray[np.float64]:
    """:func:`~pemc_stan.output.diagnostics.convergence_stats` of each group's chains of
    one column (``values`` shaped (chains, draws)): (groups, 3)."""
    return np.array([convergence_stats(_two_halves(values[groups == g]))
                     for g in range(n_groups)], dtype=float).reshape(n_groups, 3)


def _worst_rhat(stats: NDArray[np.float64]) -> float:
    """The largest finite R-hat of :func:`_group_stats` (NaN when none is finite): a group
    whose draws are constant (NaN) must not hide another group's failure."""
    finite = np.isfinite(stats[:, 0])
    return float(np.max(stats[finite, 0])) if finite.any() else float("nan")


def _two_halves(draws: NDArray[np.float64]) -> NDArray[np.float64]:
    """A group's draws (chains, draws), one chain cut into two halves (split R-hat's own
    cut, so that the diagnostics, which want two chains, can run)."""
    if draws.shape[0] != 1:
        return draws
    half = draws.shape[1] // 2
    return np.stack([draws[0, :half], draws[0, half:2 * half]])


class ModeSplitFit(ExtendedFit):
    """A fit made of NUTS chains of the user's program, a group of chains per mode.

    Each draw of group ``g`` (``n_g`` draws) weighs ``p_g / n_g`` with
    ``p_g = Z_g / sum Z``; expectations are ``sum_g p_g E_g[f]`` with the delta-method
    standard error (each group's Monte-Carlo error, and each ``log Z_g``'s error
    through ``p``).

    Parameters
    ----------
    fit
        The CmdStan run of the user's unchanged program (all groups' chains).
    result
        The method's transform result (the fit reports the method that ran it).
    groups
        Each chain's group of modes, (chains,) (:func:`cell_groups`).
    mode_log_z
        Each group's bridge estimate of ``log Z_g``.
    search
        The pilot's search whose modes the chains started at.
    cells
        The search's cell (nearest mode centre) of every draw, (chains, draws).
    members
        The cells of each group.
    outside
        Each chain's share of draws outside its group's cells.
    wide_log_weights
        ``log gamma - log q`` of the wide importance sampler's draws (:func:`wide_log_weights`;
        None with one mode found).
    data, original_model, seed
        As :class:`~pemc_stan.methods.base.ExtendedFit`.
    """

    resampling = "pooled"

    def __init__(self, fit: cmdstanpy.CmdStanMCMC, result: Any, *, groups: NDArray[np.intp],
                 mode_log_z: list[EvidenceEstimate], search: ModeSearch,
                 cells: NDArray[np.intp], members: list[list[int]],
                 outside: NDArray[np.float64], data: Mapping[str, Any] | None = None,
                 original_model: Any = None, seed: int | None = None,
                 wide_log_weights: NDArray[np.float64] | None = None) -> None:
        super().__init__(fit, result, data=data, original_model=original_model, seed=seed)
        self.wide_log_weights = wide_log_weights
        self._groups = np.asarray(groups, dtype=np.intp)
        self.mode_log_z = list(mode_log_z)
        self.search = search
        self.cells = np.asarray(cells, dtype=np.intp)
        self.members = [list(m) for m in members]
        self.outside = np.asarray(outside, dtype=float)
        #: Steps the split took before it was accepted (its longer run,
        #: :func:`_run_longer`), shown with the follow-up's.
        self.split_steps: list[Any] = []
        #: Gradient evaluations of the split's runs before this one (its refused
        #: first run, when it ran longer).
        self.earlier_gradients = 0

    # ------------------------------------------------------------------ the mixture
    def chain_groups(self) -> NDArray[np.intp]:
        """Each chain's mode group (chains of one group sample one mode)."""
        return self._groups.copy()

    def gradients(self) -> int:
        """Gradient evaluations of this run and of the split's refused run before it
        (:func:`_run_longer`).

        Raises
        ------
        Nothing.
        """
        return self.earlier_gradients + self.run_gradients()

    def mode_weights(self) -> NDArray[np.float64]:
        """``p_g = Z_g / sum Z`` of each group.

        Raises
        ------
        Nothing (NaN when a mass is not finite).
        """
        return mixture_weights([e.log_z for e in self.mode_log_z])

    def particle_log_weights(self) -> NDArray[np.float64]:
        """``log p_g - log n_g`` for every draw of group ``g``, shape (chains, draws, 1)."""
        n_draws = self._draws.shape[0]
        counts = np.bincount(self._groups) * n_draws
        lw = np.log(self.mode_weights())[self._groups] - np.log(counts[self._groups])
        return np.repeat(lw[:, None, None], n_draws, axis=1)

    def expectation(self, f: Callable[[Any], NDArray[np.float64]] | str,
                    **ignored: Any) -> WeightedEstimate:
        """``E[f] = sum_g p_g E_g[f]`` with its delta-method standard error.

        Keywords of the methods' own estimators (PE's ``estimator=``) are accepted and
        ignored: the split's draws are plain NUTS draws.

        Raises
        ------
        KeyError
            For an unknown column.
        ValueError
            For a callable returning the wrong shape.
        """
        raw = self._values(f)
        if raw.shape != (*self._draws.shape[1::-1], 1):
            raise ValueError(f"f returned shape {raw.shape}; expected (chains, draws, 1) = "
                             f"{(*self._draws.shape[1::-1], 1)}")
        values = raw[..., 0]
        parts = [values[self._groups == g] for g in range(len(self.mode_log_z))]
        per = [self._estimate(v) for v in parts]
        m = np.array([e.mean for e in per])
        est, se = mixture_mean([e.log_z for e in self.mode_log_z],
                               [e.std_error for e in self.mode_log_z], m,
                               [e.mcse for e in per])
        p = self.mode_weights()
        spread = float(np.sum(p * (np.array([np.var(v) for v in parts]) + (m - est) ** 2)))
        ess = spread / se**2 if se > 0 else float(values.size)
        return WeightedEstimate(mean=est, mcse=se, ess=ess)

    def convergence(self) -> pd.DataFrame:
        """R-hat, bulk and tail ESS of every original parameter column, judged per group.

        R-hat is the largest of the groups' (chains of one group sample one mode, or
        one set of connected modes).  The ESS is that of the mixture's estimate,
        ``1 / sum_g (p_g^2 / ESS_g)``: a group weighing ``p_g`` adds ``p_g^2`` times its
        own Monte-Carlo variance, so a light group needs fewer effective draws.

        Raises
        ------
        Nothing beyond the fit's own errors.
        """
        cached: pd.DataFrame | None = getattr(self, "_convergence", None)
        if cached is None:
            p = self.mode_weights()
            rows = []
            for c in self.parameter_columns():
                values = self.particles(c)[..., 0]  # equal weights within a chain
                stats = _group_stats(values, self._groups, len(p))
                rows.append((_worst_rhat(stats),
                             float(1.0 / np.nansum(p**2 / stats[:, 1])),
                             float(1.0 / np.nansum(p**2 / stats[:, 2]))))
            cached = pd.DataFrame(rows, index=pd.Index(self.parameter_columns(), name="name"),
                                  columns=["r_hat", "ess_bulk", "ess_tail"], dtype=float)
            self._convergence = cached
        return cached.copy()

    def resample_index(self) -> NDArray[np.intp]:
        """Systematic resampling over all draws by their weights, shuffled across chains:
        every resampled chain is a draw of the whole mixture (cut in order, each chain
        would sit in one mode, and R-hat of the resampled draws would flag a sound fit).

        Raises
        ------
        Nothing.
        """
        if self._index is None:
            rng = np.random.default_rng(self.seed)
            lw = self.particle_log_weights()[..., 0]
            flat = W.resample_indices(lw.reshape(-1), rng, method="systematic")
            self._index = rng.permutation(flat).reshape(lw.shape)
        return self._index

    def log_z(self) -> EvidenceEstimate:
        """``log Z = log sum_g Z_g`` with ``se^2 = sum_g p_g^2 se_g^2``.

        Raises
        ------
        ImproperPriorError
            If a parameter has a flat, improper prior (the evidence is then undefined).
        """
        undefined = self.log_z_undefined()
        if undefined is not None:
            raise undefined
        return self.mode_split_log_z()

    def mode_split_log_z(self) -> EvidenceEstimate:
        """The sum of the modes' bridge estimates (also under an improper prior)."""
        lz = [e.log_z for e in self.mode_log_z]
        se = [e.std_error for e in self.mode_log_z]
        log_z, std_error = mixture_log_z(lz, se)
        return EvidenceEstimate(log_z, std_error, "mode_split_bridge",
                                {"modes": len(lz), "mode_log_z": lz, "mode_std_error": se})

    def evidence_estimate(self, estimator: str, **settings: Any) -> EvidenceEstimate:
        """The modes' summed bridge estimates, whichever of the method's own estimators is
        asked for: the run did not temper, so there are no tempered draws to estimate from.

        Raises
        ------
        ImproperPriorError
            If the evidence is undefined (an improper prior).
        """
        logger.info("the run split the modes instead of tempering: log Z by estimator %r is "
                    "the sum of the modes' bridge estimates", estimator)
        return self.log_z()

    # ------------------------------------------------------------------ the verdict
    def method_checks(self) -> Iterator[tuple[str, Reason | None]]:
        """Every mode's mass, the chains' cells (the search's unseen share is a shared
        check, ``mode_search``)."""
        bad = [g for g, e in enumerate(self.mode_log_z)
               if not (np.isfinite(e.log_z) and np.isfinite(e.std_error)
                       and e.diagnostics.get("converged", True))]
        yield "mode_masses", None if not bad else Reason(
            "mode_masses", f"bridge sampling gave no finite, converged mass for {len(bad)} "
            "group(s) of modes",
            "run longer (iter_sampling), or with split_modes='never' (tempering)")
        worst = float(np.max(self.outside)) if self.outside.size else 0.0
        yield "mode_cells", None if worst <= 2 * LEFT_SHARE_MAX else Reason(
            "mode_cells", f"a chain spent {100 * worst:.1f}% of its draws in the cells of other "
            "groups of modes: the groups are connected for NUTS",
            "run with split_modes='never' (tempering)")
        yield "mode_groups", self._ungrouped()
        yield "mode_occupancy", self._occupancy()
        yield "mode_wide_mass", self._wide_mass()

    def wide_mass(self) -> tuple[float, float] | None:
        """``(excess, z)`` of :func:`~pemc_stan.estimators.mixture.unexplained_mass`: the
        mass the wide importance sampler sees beyond the groups' (None without it)."""
        if self.wide_log_weights is None:
            return None
        est = self.mode_split_log_z()
        try:
            return unexplained_mass(self.wide_log_weights, est.log_z, est.std_error)
        except ValueError:
            return None

    def _wide_mass(self) -> Reason | None:
        """Mass that no group holds, seen by importance sampling from around the modes.

        The search's unseen share counts starting points, not mass: a narrow mode among
        the others (a grid of modes) has a small basin and can hold much mass.  Draws of
        the found modes' covering Gaussian, as it is and with its standard deviations
        doubled, weigh the whole target (in few dimensions, where they reach every mode)
        without the search's bias, and draws of the modes' own Gaussians keep the
        weights even where the groups hold the mass
        (:func:`~pemc_stan.modes.wide.wide_log_weights`); when their estimate of
        ``Z`` exceeds the groups' by more than :data:`WIDE_EXCESS_Z` standard errors, a
        mode is missing.  (In many dimensions the weights are too rare to see anything,
        and this check passes.)
        """
        wide = self.wide_mass()
        if wide is None or not wide[1] > WIDE_EXCESS_Z:
            return None
        return Reason("mode_wide_mass", f"importance sampling around the modes found sees "
                      f"{100 * wide[0]:.0f}% more mass than the groups of modes hold ("
                      f"{wide[1]:.1f} standard errors): the search missed a mode",
                      "run with split_modes='never' (tempering)")

    def _ungrouped(self) -> Reason | None:
        """A mode of material mass that no group holds: no chain stayed there, so its
        mass is missing from every estimate (draws that pass through it briefly are not
        a sample of it)."""
        grouped = {k for cells in self.members for k in cells}
        shares = np.asarray(self.search.major_shares, dtype=float)
        lost = [(k, float(q)) for k, q in enumerate(shares)
                if k not in grouped and q >= UNVISITED_SHARE_MIN]
        if not lost:
            return None
        listed = ", ".join(f"mode {k + 1} ({100 * q:.0f}% of the mass found)" for k, q in lost)
        return Reason("mode_groups", f"no chain stayed in {listed}: its mass is missing from "
                      "the estimates", "run with split_modes='never' (tempering)")

    def _occupancy(self) -> Reason | None:
        """A mode that the chains of its group visit far less than the search weighed it.

        Within a group of connected modes, NUTS must carry the chains between the modes
        in proportion to their masses; a narrow mode inside a wide one (a spike in a
        slab) is entered rarely, and its mass would be lost.  The search's share of each
        mode (Pathfinder's importance-sampling masses) is rough, so only a mode holding
        at least :data:`OCCUPANCY_SHARE_MIN` of its group's searched mass and holding
        less than that share divided by :data:`OCCUPANCY_FACTOR` of the group's draws
        counts.
        """
        shares = np.asarray(self.search.major_shares, dtype=float)
        for g, cells in enumerate(self.members):
            if len(cells) < 2:
                continue
            labels = self.cells[self._groups == g]
            expected = shares[cells] / np.sum(shares[cells])
            seen = np.array([np.mean(labels == k) for k in cells])
            for k, q, o in zip(cells, expected, seen, strict=True):
                if q >= OCCUPANCY_SHARE_MIN and o < q / OCCUPANCY_FACTOR:
                    return Reason(
                        "mode_occupancy", f"the chains of a group of connected modes spent "
                        f"{100 * o:.1f}% of their draws at mode {k + 1}, which the search "
                        f"weighed at {100 * q:.0f}% of the group: NUTS rarely enters it",
                        "run with split_modes='never' (tempering)")
        return None

    def diagnostics(self, warn: bool = True) -> dict[str, Any]:
        """NUTS diagnostics, the modes' masses and the cells' closure."""
        info = super().diagnostics(warn=False)
        p = self.mode_weights()
        info["mode_split"] = {
            "modes": len(p), "chains_per_group": np.bincount(self._groups).tolist(),
            "mode_masses": p.tolist(),
            "mode_log_z": [e.log_z for e in self.mode_log_z],
            "mode_log_z_se": [e.std_error for e in self.mode_log_z],
            "mode_groups": [[k + 1 for k in m] for m in self.members],
            "largest_share_outside_group": (float(np.max(self.outside)) if self.outside.size
                                            else 0.0)}
        info["sampling"] = (f"modes split: {len(p)} group(s) of modes sampled by their own "
                            "NUTS chains, weighted by bridge-sampled masses (no tempering "
                            "was needed)")
        if warn:
            for m in info.get("messages", []):
                emit_warning(m, UserWarning)
        return info

    def output_extras(self) -> OutputExtras:
        """The strategy and the modes' masses (attributes and settings); sample stats
        ``mode_group`` (each draw's group), ``log_weight`` (``log p_g - log n_g``) and
        ``weight`` (normalised over all draws), with the attribute ``weight_ess``."""
        p = self.mode_weights()
        lw = self.particle_log_weights()[..., 0]
        w = np.exp(lw - logsumexp(lw))
        both = ("chain", "draw")
        group = np.repeat(self._groups[:, None], lw.shape[1], axis=1)
        attrs = {"pemc_sampling": "mode_split", "pemc_modes_split": len(p),
                 "pemc_mode_masses": [float(x) for x in p]}
        return OutputExtras(
            attributes=attrs,
            settings={"sampling": "mode_split", "mode_masses": p.tolist(),
                      "mode_groups": [[k + 1 for k in m] for m in self.members]},
            sample_stats={"mode_group": (both, group), "log_weight": (both, lw),
                          "weight": (both, w)},
            sample_stats_attrs={"weight_ess": float(1.0 / np.sum(w**2))})


class SplitOutcome:
    """What :func:`split_modes` decided: the fit, or why the method must temper.

    Attributes
    ----------
    fit
        The accepted :class:`ModeSplitFit`, or None.
    why
        Why the split was not used: refused after its run, or not started (too many
        modes, a search that may have missed modes, initial values given); empty when it
        was used, or when there was no search to split by.
    tried
        Whether the split's chains ran (else ``why`` says why they were not started).
    names
        The names of the verdict's reasons when the split was refused for them.
    unexplained
        Refused for mass no group holds (``mode_wide_mass``): starts where that mass is,
        in base coordinates (:func:`unexplained_starts`); else None.
    modes
        With ``unexplained``: the Gaussians of the modes' draws (:func:`_mode_gaussians`).
    rhat
        Refused for R-hat within a group: the largest (else NaN).
    """

    def __init__(self, fit: ModeSplitFit | None = None, why: str = "", tried: bool = False,
                 names: tuple[str, ...] = ()):
        self.fit, self.why, self.tried, self.names = fit, why, tried, names
        self.unexplained: NDArray[np.float64] | None = None
        self.modes: ModeGaussians = []
        self.rhat = float("nan")

    def note(self) -> tuple[str, str, str] | None:
        """``(name, message, remedy)`` for the method's fit, when the split was tried and
        rejected."""
        if self.fit is not None or not self.why:
            return None
        if not self.tried:
            return ("mode_split", f"the modes were not split: {self.why}", "nothing to do")
        return ("mode_split", f"the modes were not split, so the run tempered: {self.why}",
                "nothing to do; split_modes='never' skips the attempt")


def _inits(model: MethodModel, coords: Any, centres: NDArray[np.float64], per_mode: int
           ) -> list[Mapping[str, Any]]:
    """Initial values of ``per_mode`` chains at each centre (base coordinates)."""
    out: list[Mapping[str, Any]] = []
    for centre in centres:
        values = coords.inverse(np.asarray(centre, dtype=float)[None, :], model.data)
        out.extend([{name: np.asarray(v)[0].tolist() for name, v in values.items()}] * per_mode)
    return out


def scout_inits(model: MethodModel, coords: Any, n: int, seed: int | None
                ) -> list[Mapping[str, Any]]:
    """Initial values of ``n`` scout chains: uniform on ``(-2, 2)`` in every base
    coordinate, as CmdStan starts its chains on the unconstrained scale.

    Raises
    ------
    ValueError
        If the base coordinates cannot be evaluated from the data.
    """
    rng = np.random.default_rng(None if seed is None else seed + SCOUT_SEED_OFFSET)
    z = rng.uniform(-2.0, 2.0, size=(n, coords.dim(model.data)))
    values = coords.inverse(z, model.data)
    return [{name: np.asarray(v)[i].tolist() for name, v in values.items()} for i in range(n)]


def run_inits(model: MethodModel, coords: Any, centres: NDArray[np.float64], chains: int,
              seed: int | None) -> list[Mapping[str, Any]] | None:
    """Where the split's chains start: ``chains`` scouts (:func:`scout_inits`), then
    :data:`CHAINS_PER_MODE` at each centre; with a single centre, None: the scouts alone,
    started by CmdStan itself (plain NUTS as the user would run it, CmdStan retrying an
    initial value where the density fails), and a mode the search found that none of
    them reaches is unvisited, and flagged.

    Raises
    ------
    ValueError
        If the base coordinates cannot be evaluated from the data.
    """
    if len(centres) < 2:
        return None
    return [*scout_inits(model, coords, chains, seed),
            *_inits(model, coords, centres, CHAINS_PER_MODE)]


def _group_draws(fit: cmdstanpy.CmdStanMCMC, names: list[str], chains: NDArray[np.bool_]
                 ) -> dict[str, NDArray[np.float64]]:
    out = {}
    for name in names:
        v = np.asarray(fit.stan_variable(name), dtype=float)
        v = v.reshape((fit.chains, v.shape[0] // fit.chains, *v.shape[1:]))
        out[name] = v[chains]
    return out


def _base_coordinates(model: MethodModel, coords: Any, fit: cmdstanpy.CmdStanMCMC
                      ) -> NDArray[np.float64]:
    draws = np.asarray(fit.draws(concat_chains=False), dtype=float)  # (iter, chains, cols)
    n_iter, n_chains, _ = draws.shape
    flat = np.transpose(draws, (1, 0, 2)).reshape(n_chains * n_iter, -1)
    z, _ = coords.forward(coordinate_draws(coords, flat, list(fit.column_names), model.data),
                          model.data)
    return np.asarray(z, dtype=float).reshape(n_chains, n_iter, -1)


def split_modes(model: MethodModel, search: ModeSearch | None, *, chains: int, iter_warmup: int,
                iter_sampling: int, seed: int | None,
                output_dir: str | os.PathLike[str] | None, show_progress: bool,
                extend: int = MAX_EXTENSIONS, **cmdstanpy_kwargs: Any) -> SplitOutcome:
    """Try the mode split (see the module docstring) after the pilot's ``search``.

    Parameters
    ----------
    model
        The method's model (its original program, data and base coordinates).
    search
        The pilot's search (None: nothing is tried).
    chains
        The chains the user asked for: they start where CmdStan would start them
        (:func:`scout_inits`), and when the search found several modes,
        :data:`CHAINS_PER_MODE` more start at each (with one mode, the run is plain NUTS
        as the user would run it).
    iter_warmup, iter_sampling, seed, output_dir, show_progress
        As ``CmdStanModel.sample`` (the draws' CSV files go to ``output_dir``).
    extend
        How many more times a split refused for mass no group holds may search again
        from that mass and run once more with the modes it finds
        (:func:`_split_extended`; 0: not).
    **cmdstanpy_kwargs
        Further NUTS arguments (``adapt_delta``, ...).  With ``inits`` given nothing is
        tried: the user chose where the chains start.

    Returns
    -------
    SplitOutcome
        The accepted fit, or why the method should run as usual.

    Raises
    ------
    RuntimeError
        If CmdStan fails on the user's program.
    """
    coords = getattr(model.result, "coordinates", None)
    if search is None or search.centres is None or search.base is None or coords is None \
            or not coords.blocks:
        return SplitOutcome()
    centres = np.asarray(search.centres, dtype=float)
    if len(centres) > MAX_SPLIT_MODES:
        return SplitOutcome(why=f"{len(centres)} modes found (> {MAX_SPLIT_MODES})")
    if not search.unseen <= UNSEEN_SHARE_MAX:
        return SplitOutcome(why=f"the search may have missed modes (unseen share "
                                f"{search.unseen:.3f} > {UNSEEN_SHARE_MAX})")
    if cmdstanpy_kwargs.get("inits") is not None:
        return SplitOutcome(why="initial values were given, and the split starts its chains "
                                "at the modes")
    kwargs = {k: v for k, v in cmdstanpy_kwargs.items() if k != "chains"}
    kwargs.setdefault("sig_figs", 12)
    inits = run_inits(model, coords, centres, chains, seed)
    run = _run(model, f"mode split: {chains} NUTS chains from Stan's usual initial values"
               + (f" and {CHAINS_PER_MODE} at each of {len(centres)} modes of the search"
                  if len(centres) > 1 else ""),
               inits, chains if inits is None else len(inits), iter_warmup, iter_sampling,
               seed, output_dir, show_progress, kwargs)
    if isinstance(run, SplitOutcome):
        return run
    outcome = _judge(model, coords, search, run, seed)
    spent = float(MAX_EXTENSIONS - extend)  # earlier splits' runs, in first runs
    if outcome.unexplained is not None and outcome.unexplained.size and extend > 0 \
            and _budget_allows(model, 1.0, spent=spent):
        return _split_extended(model, search, run, outcome, chains=chains,
                               iter_warmup=iter_warmup, iter_sampling=iter_sampling, seed=seed,
                               output_dir=output_dir, show_progress=show_progress,
                               kwargs=cmdstanpy_kwargs, extend=extend - 1)
    if outcome.fit is not None or not outcome.names \
            or not set(outcome.names) <= set(SPLIT_LONGER_REASONS) \
            or not longer_can_fix(outcome.rhat, _budget(model)) \
            or not _longer_allowed(model, iter_warmup, iter_sampling, spent=spent):
        return outcome
    return _run_longer(model, coords, search, run, outcome, iter_warmup=iter_warmup,
                       iter_sampling=iter_sampling, seed=seed, output_dir=output_dir,
                       show_progress=show_progress, kwargs=kwargs)


def _run(model: MethodModel, title: str, inits: list[Mapping[str, Any]] | None, chains: int,
         iter_warmup: int, iter_sampling: int, seed: int | None,
         output_dir: str | os.PathLike[str] | None, show_progress: bool,
         kwargs: dict[str, Any]) -> cmdstanpy.CmdStanMCMC | SplitOutcome:
    """The split's NUTS chains on the user's program (a refusal when CmdStan fails)."""
    with stage(title):
        try:
            return model.original_model().sample(
                data=model.data or None, chains=chains, iter_warmup=iter_warmup,
                iter_sampling=iter_sampling, seed=seed, inits=inits,
                output_dir=None if output_dir is None else str(output_dir),
                show_progress=show_progress, **kwargs)
        except RuntimeError as exc:  # e.g. an ODE that fails where a scout started
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return SplitOutcome(why=f"CmdStan failed on the split's chains ({first})",
                                tried=True)


def _budget(model: MethodModel) -> float:
    """The follow-up budget (:attr:`~pemc_stan.methods.base.MethodModel.follow_up_budget`;
    None: the default)."""
    budget = getattr(model, "follow_up_budget", None)
    return DEFAULT_BUDGET if budget is None else float(budget)


def _budget_allows(model: MethodModel, scale: float, spent: float = 0.0) -> bool:
    """Whether the follow-up budget (:func:`_budget`) has room, after the first run and
    ``spent`` more of its cost, for one more run of ``scale`` times its cost, predicted at
    :data:`~pemc_stan.methods.follow_up.PREDICTION_MARGIN` times that."""
    return 1.0 + spent + PREDICTION_MARGIN * scale <= _budget(model)


def _longer_allowed(model: MethodModel, iter_warmup: int, iter_sampling: int,
                    spent: float = 0.0) -> bool:
    """:func:`_budget_allows` the split's longer run (twice the draws)."""
    scale = (iter_warmup + 2 * iter_sampling) / max(iter_warmup + iter_sampling, 1)
    return _budget_allows(model, scale, spent)


def _last_draws(run: cmdstanpy.CmdStanMCMC, names: list[str]) -> list[Mapping[str, Any]]:
    """Each chain's last draw (constrained values), as initial values."""
    last = {k: v[:, -1] for k, v in
            _group_draws(run, names, np.ones(run.chains, dtype=bool)).items()}
    return [{k: v[c].tolist() for k, v in last.items()} for c in range(run.chains)]


def _run_longer(model: MethodModel, coords: Any, search: ModeSearch,
                run: cmdstanpy.CmdStanMCMC, first: SplitOutcome, *, iter_warmup: int,
                iter_sampling: int, seed: int | None,
                output_dir: str | os.PathLike[str] | None, show_progress: bool,
                kwargs: dict[str, Any]) -> SplitOutcome:
    """The split run once more, twice as long, every chain from its last draw, when its
    verdict names only slow mixing within groups (:data:`SPLIT_LONGER_REASONS`): the
    20-Gaussian mixture, seed 3, was refused for an R-hat of 1.087 in the group of two
    modes 0.4 apart between which its chains moved, and the tempered run then left a
    mode unvisited.  The longer run alone is judged, and the step is recorded
    (:attr:`ModeSplitFit.split_steps`)."""
    change = f"iter_sampling {iter_sampling} -> {2 * iter_sampling} (mode split)"
    logger.info("mode split: run again with %s after %s", change, first.why)
    again = _run(model, f"mode split: {change}, every chain from its last draw",
                 _last_draws(run, list(model.program.parameter_names)), run.chains,
                 iter_warmup, 2 * iter_sampling, None if seed is None else seed + 1,
                 None if output_dir is None else os.path.join(output_dir, "split_longer"),
                 show_progress, kwargs)
    if isinstance(again, SplitOutcome):
        return SplitOutcome(why=f"{first.why}; {change}: {again.why}", tried=True)
    second = _judge(model, coords, search, again, None if seed is None else seed + 1)
    if second.fit is None:
        return SplitOutcome(why=f"{first.why}; after {change}: {second.why}", tried=True,
                            names=second.names)
    second.fit.split_steps = [FollowUpStep(change, first.why, second.fit.run_gradients(),
                                           "ok")]
    second.fit.earlier_gradients = _earlier_gradients(run)
    return second


def _earlier_gradients(run: cmdstanpy.CmdStanMCMC) -> int:
    """Gradient evaluations of a refused run of the split (0 without its step sizes)."""
    steps = np.asarray(run.draws(concat_chains=False), dtype=float)
    cols = list(run.column_names)
    if "n_leapfrog__" not in cols:
        return 0
    return int(leapfrog_gradients(steps[:, :, cols.index("n_leapfrog__")],
                                  getattr(run.metadata, "cmdstan_config", {})))


def _extend_search(model: MethodModel, search: ModeSearch, refused: SplitOutcome,
                   seed: int | None) -> ModeSearch | None:
    """The search with the modes that Pathfinder paths from the refused split's
    unexplained mass (:attr:`SplitOutcome.unexplained`) reach and that no found mode's
    Gaussian holds (Mahalanobis distance beyond its 99.9% radius); their shares are their
    paths' masses against the groups'.  None when the model has no pilot, Pathfinder
    fails or nothing new is found."""
    make = getattr(model, "_pilot", None)
    if make is None or refused.unexplained is None or not refused.modes:
        return None
    try:
        groups, centres = make().modes_from(refused.unexplained, seed, search.seconds_per_path)
    except Exception as exc:  # Pathfinder or the density failing there: keep the refusal
        logger.info("mode split: the search from the unexplained mass failed (%s)",
                    " ".join(str(exc).split())[:160])
        return None
    log_found = float(logsumexp([m[0] for m in refused.modes]))
    shares = np.exp(np.array([lm for _, lm in groups]) - log_found)
    new = (shares >= NEW_MODE_SHARE) & ~_held(centres, refused.modes)
    if not np.any(new):
        return None
    scale = 1.0 + float(np.sum(shares[new]))
    said = (f"{len(refused.unexplained)} restarts from the mass the split's importance "
            f"sampler saw beyond the modes: {int(np.sum(new))} new mode(s)")
    return dataclasses.replace(
        search, modes=search.modes + int(np.sum(new)),
        major_modes=search.major_modes + int(np.sum(new)),
        paths=search.paths + len(refused.unexplained), stopped=f"{search.stopped}; {said}",
        mode_shares=tuple(float(x) for x in np.concatenate(
            [np.asarray(search.mode_shares, dtype=float), shares[new]]) / scale),
        centres=np.vstack([np.asarray(search.centres, dtype=float), centres[new]]),
        major_shares=tuple(float(x) for x in np.concatenate(
            [np.asarray(search.major_shares, dtype=float), shares[new]]) / scale))


#: A centre lies in a found mode when its squared Mahalanobis distance under the mode's
#: Gaussian is within this quantile of the chi-squared distribution.
HELD_QUANTILE = 0.999


def _held(centres: NDArray[np.float64], modes: ModeGaussians) -> NDArray[np.bool_]:
    """Whether each centre lies within :data:`HELD_QUANTILE` of some mode's Gaussian."""
    from scipy.stats import chi2

    c = np.atleast_2d(np.asarray(centres, dtype=float))
    radius = float(chi2.ppf(HELD_QUANTILE, c.shape[1]))
    held = np.zeros(c.shape[0], dtype=bool)
    for _, mean, cov in modes:
        try:
            r = np.linalg.solve(np.linalg.cholesky(cov), (c - mean).T)
        except np.linalg.LinAlgError:
            continue
        held |= np.sum(r * r, axis=0) <= radius
    return held


def _split_extended(model: MethodModel, search: ModeSearch, run: cmdstanpy.CmdStanMCMC,
                    refused: SplitOutcome, *, chains: int, iter_warmup: int,
                    iter_sampling: int, seed: int | None,
                    output_dir: str | os.PathLike[str] | None, show_progress: bool,
                    kwargs: dict[str, Any], extend: int = 0) -> SplitOutcome:
    """A split refused for mass no group holds, tried once more with the modes a search
    from that mass finds (:func:`_extend_search`): the wide sampler saw them, so the
    run can sample them instead of tempering (the mixture on R^2 with one round of
    restarts, seeds 1 and 2: 10 and 13 of its modes found, 36% and 16% of the mass
    seen beyond them).  The new split alone is judged, and may extend ``extend`` more
    times; the step is recorded."""
    wider = _extend_search(model, search, refused, None if seed is None else seed + 2)
    if wider is None:
        return refused
    change = f"modes {len(search.centres)} -> {len(wider.centres)} (mode split)"
    logger.info("mode split: run again with %s after %s", change, refused.why)
    again = split_modes(model, wider, chains=chains, iter_warmup=iter_warmup,
                        iter_sampling=iter_sampling, seed=None if seed is None else seed + 2,
                        output_dir=None if output_dir is None
                        else os.path.join(output_dir, "split_extended"),
                        show_progress=show_progress, extend=extend, **kwargs)
    if again.fit is None:
        return SplitOutcome(why=f"{refused.why}; {change}: {again.why}", tried=True,
                            names=again.names)
    again.fit.split_steps.insert(0, FollowUpStep(change, refused.why,
                                                 again.fit.run_gradients(), "ok"))
    again.fit.earlier_gradients += _earlier_gradients(run)
    return again


def try_split(model: MethodModel, search: ModeSearch | None,
              notes: list[tuple[str, str, str]], **run: Any) -> ModeSplitFit | None:
    """:func:`split_modes`, for a method's ``sample``: the accepted fit, or None after
    appending why not (when there is a why) to the method's ``notes``.

    Raises
    ------
    RuntimeError
        As :func:`split_modes`.
    """
    outcome = split_modes(model, search, **run)
    note = outcome.note()
    if outcome.fit is None and note is not None:
        notes.append(note)
    return outcome.fit


def _judge(model: MethodModel, coords: Any, search: ModeSearch, run: cmdstanpy.CmdStanMCMC,
           seed: int | None) -> SplitOutcome:
    """Cells, masses and the verdict of a split's run (a refusal that says why)."""
    try:
        return _judge_run(model, coords, search, run, seed)
    except (ValueError, PemcStanError) as exc:  # draws the base coordinates cannot map
        return SplitOutcome(why=f"the split's draws could not be judged ({exc})", tried=True)


def _judge_run(model: MethodModel, coords: Any, search: ModeSearch,
               run: cmdstanpy.CmdStanMCMC, seed: int | None) -> SplitOutcome:
    """:func:`_judge` without the refusal for draws that cannot be mapped.  The wide
    importance sampler (:func:`_wide_sample`) runs only for a split every other check
    passed: it can only refuse it, and on the Boltzmann relaxation it took 4-25 s to
    draw for a split its chains' R-hat had already refused."""
    centres = np.asarray(search.centres, dtype=float)
    z = _base_coordinates(model, coords, run)
    n_chains, n_draws, dim = z.shape
    cells = search.base.nearest_centre(z.reshape(-1, dim), centres).reshape(n_chains, n_draws)
    groups, outside, members = cell_groups(cells, len(centres))
    program = model.program
    names = list(program.parameter_names)
    slow = _unmixed_group(run, names, groups, len(members))
    if slow is not None:
        refused = SplitOutcome(why=slow[0], tried=True, names=("rhat",))
        refused.rhat = slow[1]
        return refused
    evaluator = DensityEvaluator(program, model.data, program.name)  # its CSVs: temporary
    masses = []
    with stage(f"mode split: bridge sampling of {len(members)} mode mass(es)"):
        for g, cells_g in enumerate(members):
            def region(values: Mapping[str, NDArray[np.float64]],
                       cells_g: list[int] = cells_g) -> NDArray[np.bool_]:
                zg, _ = coords.forward(values, model.data)
                return np.isin(search.base.nearest_centre(zg, centres), cells_g)

            try:
                masses.append(bridge_from_draws(
                    program, model.data, _group_draws(run, names, groups == g),
                    name=program.name, seed=None if seed is None else seed + 7919 * g,
                    evaluator=evaluator, region=region))
            except (ValueError, RuntimeError, PemcStanError) as exc:
                return SplitOutcome(why=f"bridge sampling of the mass of mode group {g + 1} "
                                        f"failed ({exc})", tried=True)
    fit = ModeSplitFit(run, model.result, groups=groups, mode_log_z=masses, search=search,
                       cells=cells, members=members, outside=outside, data=model.data,
                       original_model=model.original_model, seed=seed)
    verdict = fit.check()
    wide, modes = None, _mode_gaussians(z, cells, groups, members, masses)
    if verdict.ok and len(centres) > 1:  # the wide sampler can only refuse it: last
        with stage(f"mode split: importance draws around the {len(centres)} modes"):
            wide = _wide_sample(coords, search.base, evaluator, model.data, seed, masses,
                                modes)
        fit.wide_log_weights = None if wide is None else wide[0]
        verdict = fit.check()
    if not verdict.ok:
        outcome = SplitOutcome(why="; ".join(str(r) for r in verdict.reasons), tried=True,
                               names=tuple(verdict.names()))
        if wide is not None and "mode_wide_mass" in outcome.names:
            outcome.unexplained = unexplained_starts(
                wide[1], wide[0], fit.mode_split_log_z().log_z, search.base, modes,
                np.random.default_rng(None if seed is None else seed + WIDE_SEED_OFFSET))
            outcome.modes = modes
        return outcome
    logger.info("modes split: %d group(s) of modes, masses %s", len(masses),
                ", ".join(f"{p:.3g}" for p in fit.mode_weights()))
    return SplitOutcome(fit, tried=True)


def _unmixed_group(run: cmdstanpy.CmdStanMCMC, names: list[str], groups: NDArray[np.intp],
                   n_groups: int) -> tuple[str, float] | None:
    """The verdict's R-hat check (:meth:`ModeSplitFit.convergence`: the largest of the
    groups' R-hat of each parameter) before the masses are estimated: a split it refuses
    is refused without bridge sampling (on the Boltzmann relaxation, 3-5 s a run for
    chains whose R-hat within their one group was 3.2).  Why and the R-hat, or None
    when it passes.

    Raises
    ------
    Nothing beyond cmdstanpy's errors reading the draws.
    """
    every = np.ones(run.chains, dtype=bool)
    for name in names:
        v = _group_draws(run, [name], every)[name]
        v = v.reshape(v.shape[0], v.shape[1], -1)
        for j in range(v.shape[2]):
            worst = _worst_rhat(_group_stats(v[:, :, j], groups, n_groups))
            if worst > RHAT_MAX:
                return (f"rhat: R-hat of {name} (element {j + 1}) within a group of modes is "
                        f"{worst:.3g} (> {RHAT_MAX}): its chains disagree (their masses were "
                        "not estimated)", worst)
    return None


def wide_resolution(log_masses: list[float]) -> float:
    """The standard error the wide sampler's unexplained mass must reach: the lightest
    group's share of the groups' mass over ``WIDE_EXCESS_Z + WIDE_POWER_Z``, within
    [:data:`WIDE_SE_MIN`, :data:`WIDE_SE_MAX`].

    Raises
    ------
    Nothing.
    """
    lm = np.asarray(log_masses, dtype=float)
    lm = lm[np.isfinite(lm)]
    if lm.size == 0:
        return WIDE_SE_MAX
    lightest = float(np.exp(np.min(lm) - logsumexp(lm)))
    return float(np.clip(lightest / (WIDE_EXCESS_Z + WIDE_POWER_Z), WIDE_SE_MIN, WIDE_SE_MAX))


def _mode_gaussians(z: NDArray[np.float64], cells: NDArray[np.intp], groups: NDArray[np.intp],
                    members: list[list[int]], masses: list[EvidenceEstimate]) -> ModeGaussians:
    """The Gaussian of each cell's draws (its group's chains' draws in it) in base
    coordinates, weighted by its group's mass times the cell's share of the group's
    draws; cells with too few draws for a covariance, or in a group of no finite mass,
    are left out."""
    dim = z.shape[2]
    out: ModeGaussians = []
    for g, cells_g in enumerate(members):
        zg, cg = z[groups == g].reshape(-1, dim), cells[groups == g].reshape(-1)
        if not np.isfinite(masses[g].log_z) or zg.shape[0] == 0:
            continue
        for k in cells_g:
            zk = zg[cg == k]
            if zk.shape[0] > 2 * (dim + 1):
                out.append((masses[g].log_z + float(np.log(zk.shape[0] / zg.shape[0])),
                            zk.mean(axis=0), np.atleast_2d(np.cov(zk, rowvar=False))))
    return out


def _wide_sample(coords: Any, base: BaseDensity, evaluator: DensityEvaluator,
                 data: Mapping[str, Any] | None, seed: int | None,
                 masses: list[EvidenceEstimate], modes: ModeGaussians | None = None
                 ) -> tuple[NDArray[np.float64], NDArray[np.float64]] | None:
    """Batches of :func:`wide_log_weights` until the excess mass they see is
    :data:`WIDE_EXCESS_Z` standard errors above 0, or the sampler's own standard error
    (:func:`~pemc_stan.estimators.mixture.importance_error`) is at most
    :func:`wide_resolution` or the masses' own (more draws add nothing then), or could
    not see the missing mass it is meant to see (``WIDE_EXCESS_Z + WIDE_POWER_Z`` times
    its resolution) at even one standard error after :data:`WIDE_BATCHES` batches (the
    error falls as one over the square root of the draws: in many dimensions the
    weights are so uneven that it never gets anywhere, and the Boltzmann relaxation's
    27 dimensions ran all 8 batches, 25 s, for nothing).  Returns the log weights and
    their draws (base coordinates)."""
    log_z, se = mixture_log_z([e.log_z for e in masses], [e.std_error for e in masses])
    if not np.isfinite(log_z):
        return None
    resolution = wide_resolution([e.log_z for e in masses])
    goal = max(resolution, se)
    batches: list[NDArray[np.float64]] = []
    points: list[NDArray[np.float64]] = []
    for b in range(WIDE_BATCHES):
        drawn_b = wide_log_weights(coords, base, evaluator, data,
                                   None if seed is None else seed + WIDE_SEED_OFFSET + 104729 * b,
                                   modes=modes)
        if drawn_b is None:
            break
        batches.append(drawn_b[0])
        points.append(drawn_b[1])
        drawn = np.concatenate(batches)
        _, z = unexplained_mass(drawn, log_z, se)
        own = importance_error(drawn, log_z)[1]
        blind = (own * np.sqrt((b + 1) / WIDE_BATCHES)
                 > (WIDE_EXCESS_Z + WIDE_POWER_Z) * resolution)
        if z > WIDE_EXCESS_Z or own <= goal or blind:
            break
    return (np.concatenate(batches), np.concatenate(points)) if batches else None
