"""The fit of a mode split: NUTS chains of the user's program, a group of chains per
mode, each group weighed by its bridge-sampled mass (:class:`ModeSplitFit`), and the
verdict's checks of the split.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

import cmdstanpy
import numpy as np
import pandas as pd
from numpy.typing import NDArray

from pemc_stan.core.search import ModeSearch
from pemc_stan.errors import emit_warning
from pemc_stan.estimators import weights as W
from pemc_stan.estimators.log_z import EvidenceEstimate
from pemc_stan.estimators.mixture import (
    importance_in_range,
    mixture_log_z,
    mixture_mean,
    mixture_weights,
    unexplained_mass,
)
from pemc_stan.estimators.tails import tail_fields
from pemc_stan.modes.grouping import LEFT_SHARE_MAX, group_stats, worst_rhat
from pemc_stan.modes.search_mass import SearchMass
from pemc_stan.modes.wide import WIDE_EXCESS_Z
from pemc_stan.numeric import logsumexp
from pemc_stan.output.diagnostics import UNVISITED_SHARE_MIN, Reason
from pemc_stan.sampling.checks import mode_where
from pemc_stan.sampling.fit import ExtendedFit
from pemc_stan.sampling.hooks import OutputExtras, WeightedEstimate

logger = logging.getLogger(__name__)

#: Chains the split starts at each mode centre (beside the chains the user asked for,
#: started where CmdStan starts them): two, so that R-hat and the chains' agreement can
#: be judged within every mode.
CHAINS_PER_MODE = 2

__all__ = ["CHAINS_PER_MODE", "OCCUPANCY_FACTOR", "OCCUPANCY_SHARE_MIN", "ModeSplitFit",
           "draw_log_weights"]

#: In a group of connected modes, a mode the search weighed at this share of the group or
#: more ...
OCCUPANCY_SHARE_MIN = 0.05
#: ... is under-visited when it holds less than that share divided by this of the
#: group's draws.
OCCUPANCY_FACTOR = 5.0


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
        Each chain's group of modes, (chains,)
        (:func:`~pemc_stan.modes.grouping.cell_groups`).
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
        ``log gamma - log q`` of the wide importance sampler's draws
        (:func:`~pemc_stan.modes.wide.wide_log_weights`; None with one mode found).
    wide_failure, search_failure
        Why the wide importance sampler's draws, or the search's mass check's, could not
        be weighed ("" when they were or were not drawn): a named reason, never a check
        left out.
    search_mass
        What importance sampling from the search's own Gaussians sees beside the groups'
        mass (:func:`~pemc_stan.modes.search_mass.search_mass`; None: not computed).
    data, original_model, seed
        As :class:`~pemc_stan.sampling.fit.ExtendedFit`.
    """

    resampling = "pooled"
    #: Plain NUTS on the user's model: any divergence is suspect, as Stan warns (a few
    #: divergences can be all that shows the chains missed a curved mode's arms).
    any_divergence: ClassVar[bool] = True
    #: ... and trajectories cut at the maximum tree depth are, as Stan says, a cost, not a
    #: bias: each group's chains need not cross to another mode, and a mode's far regions
    #: missed show in R-hat and ESS. Alone they do not refuse the split: the tempered run
    #: that would replace it costs more and meets the same cut trajectories.
    minor_reasons: ClassVar[frozenset[str]] = frozenset({"max_treedepth"})
    #: The split runs longer within the budget itself (:func:`~pemc_stan.modes.split.
    #: _remedied`); the method's model would continue the method, not these chains.
    continuable: ClassVar[bool] = False
    #: A mode the search missed is missing from every group: a search stopped short is a
    #: reason (``mode_search``).
    reaches_unsearched: ClassVar[bool] = False

    def __init__(self, fit: cmdstanpy.CmdStanMCMC, result: Any, *, groups: NDArray[np.intp],
                 mode_log_z: list[EvidenceEstimate], search: ModeSearch,
                 cells: NDArray[np.intp], members: list[list[int]],
                 outside: NDArray[np.float64], data: Mapping[str, Any] | None = None,
                 original_model: Any = None, seed: int | None = None,
                 wide_log_weights: NDArray[np.float64] | None = None,
                 search_mass: SearchMass | None = None, wide_failure: str = "",
                 search_failure: str = "") -> None:
        super().__init__(fit, result, data=data, original_model=original_model, seed=seed)
        self.wide_log_weights = wide_log_weights
        self.wide_failure = wide_failure
        self.search_failure = search_failure
        self.search_mass = search_mass
        self._groups = np.asarray(groups, dtype=np.intp)
        self.mode_log_z = list(mode_log_z)
        self.search = search
        self.cells = np.asarray(cells, dtype=np.intp)
        self.members = [list(m) for m in members]
        self.outside = np.asarray(outside, dtype=float)
        #: Steps the split took before it was accepted (its longer run,
        #: :func:`~pemc_stan.modes.split._remedied`), shown with the follow-up's.
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
        (:func:`~pemc_stan.modes.split._remedied`).

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
        log_z = [e.log_z for e in self.mode_log_z]
        return draw_log_weights(log_z, self._groups, self._draws.shape[0])[..., None]

    def run_expectation(self, f: Callable[[Any], NDArray[np.float64]] | str,
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
        per = [self._estimate(v, tails=False) for v in parts]  # the mixture's tail below
        m = np.array([e.mean for e in per])
        est, se = mixture_mean([e.log_z for e in self.mode_log_z],
                               [e.std_error for e in self.mode_log_z], m,
                               [e.mcse for e in per])
        p = self.mode_weights()
        spread = float(np.sum(p * (np.array([np.var(v) for v in parts]) + (m - est) ** 2)))
        ess = spread / se**2 if se > 0 else float(values.size)
        share = np.exp(self.particle_log_weights()[..., 0])  # p_g / n_g of each draw
        return WeightedEstimate(mean=est, mcse=se, ess=ess,
                                **tail_fields(share * (values - est)))

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
                stats = group_stats(values, self._groups, len(p))
                rows.append((worst_rhat(stats),
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

    def run_log_z(self) -> EvidenceEstimate:
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
        return self.run_log_z()

    def own_estimate(self, estimator: str, **settings: Any) -> EvidenceEstimate | None:
        """The modes' own bridge estimates for ``"bridge"`` and the method's estimators: one
        Gaussian proposal over the resampled draws of separated modes would cover none of
        them well.

        Raises
        ------
        Nothing (the sum is defined under an improper prior too).
        """
        if estimator in ("bridge", *self.result.require_method().estimators):
            return self.mode_split_log_z()
        return None

    def title(self) -> str:
        """What ran: the mode split (the method asked for is in the settings)."""
        return "mode split (separated modes, each sampled by its own NUTS chains)"

    # ------------------------------------------------------------------ the verdict
    def method_checks(self) -> Iterator[tuple[str, Reason | None]]:
        """Every mode's mass, the chains' cells (the search's unseen share is a shared
        check, ``mode_search``)."""
        bad = [g for g, e in enumerate(self.mode_log_z)
               if not (np.isfinite(e.log_z) and np.isfinite(e.std_error)
                       and e.diagnostics.get("converged", True))]
        # the masses weigh the groups only when there are several: one group's draws are
        # the posterior's whatever its mass, and only log Z is then in doubt
        weighs = len(self.mode_log_z) > 1
        yield "mode_masses", None if not (bad and weighs) else Reason(
            "mode_masses", f"bridge sampling gave no finite, converged mass for {len(bad)} "
            "group(s) of modes",
            "run longer (iter_sampling), or with split_modes='never' (tempering)")
        yield "log_z_bridge", None if not bad or weighs else Reason(
            "log_z_bridge", f"bridge sampling of log Z did not converge "
            f"({len(self.parameter_columns())} parameter columns, "
            f"{self.chains * self.iterations} draws); the "
            "posterior draws are not affected, log Z is not to be trusted",
            "for log Z, run longer (iter_sampling): the bridge's Gaussian is fitted to the "
            "draws, and in many dimensions it needs many more draws than dimensions")
        worst = float(np.max(self.outside)) if self.outside.size else 0.0
        yield "mode_cells", None if worst <= 2 * LEFT_SHARE_MAX else Reason(
            "mode_cells", f"a chain spent {100 * worst:.1f}% of its draws in the cells of other "
            "groups of modes: the groups are connected for NUTS",
            "run with split_modes='never' (tempering)")
        yield "mode_groups", self._ungrouped()
        yield "mode_occupancy", self._occupancy()
        yield "mode_wide_mass", self._wide_mass()
        yield "mode_search_mass", self._search_mass()

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
        ``Z`` exceeds the groups' by more than :data:`~pemc_stan.modes.wide.WIDE_EXCESS_Z`
        standard errors, a
        mode is missing.  (In many dimensions the weights are too rare to see anything,
        and this check passes.)
        """
        wide = self.wide_mass()
        # weights whose moments leave floating point (clipped in the sums): no comparison
        finite = wide is None or (
            importance_in_range(np.asarray(self.wide_log_weights),
                                self.mode_split_log_z().log_z)
            and bool(np.isfinite(wide[0])) and (wide[0] <= 0 or bool(np.isfinite(wide[1]))))
        unweighed = self.wide_failure or ("" if finite else "their weights are not finite")
        if unweighed:  # a missed mode is claimed only from a finite comparison
            return Reason("mode_wide_mass", "importance sampling around the modes found could "
                          f"not weigh them: {unweighed}; whether the search missed a mode is "
                          "not known", "run with split_modes='never' (tempering)")
        if wide is None or not wide[1] > WIDE_EXCESS_Z:
            return None
        return Reason("mode_wide_mass", f"importance sampling around the modes found sees "
                      f"{100 * wide[0]:.0f}% more mass than the groups of modes hold ("
                      f"{wide[1]:.1f} standard errors): the search missed a mode",
                      "run with split_modes='never' (tempering)")

    def _search_mass(self) -> Reason | None:
        """More mass where the search found a mode than the chains found: a narrow region
        of high mass they never entered (:mod:`~pemc_stan.modes.search_mass`)."""
        if self.search_failure:
            return Reason("mode_search_mass", "importance sampling from the search's "
                          f"Gaussians could not weigh them: {self.search_failure}; whether "
                          "the chains missed mass the search found is not known",
                          "run with split_modes='never' (tempering)")
        seen = self.search_mass
        how = "" if seen is None else seen.missed(WIDE_EXCESS_Z)
        if seen is None or not how:
            return None
        if how == "whole":
            what = (f"sees {_times(seen.excess)} the mass the chains found ({seen.z:.1f} "
                    "standard errors more)")
        else:
            what = (f"puts {100 * seen.region_seen:.0f}% of the mass in its central region, "
                    f"where the chains' draws hold {100 * seen.region_chains:.1f}% "
                    f"({seen.region_z:.1f} standard errors less)")
        return Reason(
            "mode_search_mass", f"importance sampling from the search's Gaussian at mode "
            f"{seen.mode + 1} ({seen.where()}) {what}: the chains missed a narrow region "
            "of high mass there (a spike inside a wider region)",
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
        listed = "; ".join(f"mode {k + 1} at {mode_where(self, k)} ({100 * q:.0f}% of the "
                           "mass found by the search's Pathfinder importance sampling)"
                           for k, q in lost)
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
                        f"{100 * o:.1f}% of their draws at mode {k + 1} ({mode_where(self, k)}), "
                        f"which the search's Pathfinder importance sampling weighed at "
                        f"{100 * q:.0f}% of the group: NUTS rarely enters it",
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
        found = 0 if self.search.centres is None else len(self.search.centres)
        if found > 1:
            n = self.chains
            info["chains"] = (f"{n}: {n - CHAINS_PER_MODE * found} started where CmdStan "
                              f"starts them, as asked, and {CHAINS_PER_MODE} at each of the "
                              f"{found} modes the search found (every mode gets chains of its "
                              "own)")
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
                 "pemc_mode_masses": [float(x) for x in p],
                 # the chains to trace: each group's own, not the draws pooled across groups
                 "pemc_trace_group": "extended_posterior"}
        return OutputExtras(
            attributes=attrs,
            settings={"sampling": "mode_split", "mode_masses": p.tolist(),
                      "mode_groups": [[k + 1 for k in m] for m in self.members]},
            sample_stats={"mode_group": (both, group), "log_weight": (both, lw),
                          "weight": (both, w)},
            sample_stats_attrs={"weight_ess": float(1.0 / np.sum(w**2))})


def _times(excess: float) -> str:
    """``1 + excess`` in words: "2.3 times", "100 times", "4.1e+03 times"."""
    ratio = 1.0 + excess
    return f"{ratio:.3g} times" if ratio < 1e3 else f"{ratio:.1e} times"


def draw_log_weights(log_masses: list[float], groups: NDArray[np.intp], n_draws: int
                     ) -> NDArray[np.float64]:
    """``log p_g - log n_g`` of every draw of a split, shape (chains, draws): group ``g``
    (each chain's in ``groups``) holds the share ``p_g`` of ``Z`` of its masses, spread
    evenly over its ``n_g`` draws.

    Raises
    ------
    Nothing (NaN where a mass is not finite).
    """
    counts = np.bincount(groups, minlength=len(log_masses)) * n_draws
    lw = np.log(mixture_weights(log_masses))[groups] - np.log(counts[groups])
    return np.repeat(lw[:, None], n_draws, axis=1)
