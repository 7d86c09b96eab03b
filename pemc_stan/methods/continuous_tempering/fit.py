"""Post-processing of a continuously tempered (CT) fit.

A CT run samples ``(x, u)`` from the joint of eq 15 of Graham & Storkey
(2017), ``beta = logistic(u)``.  With ``Delta(x) = log zeta + log b(x) - log
gamma(x)`` (eq 17; ``b`` is the prior under likelihood-only tempering) the
Rao-Blackwellised weights of eq 20 are ``w_0 = p(beta = 0 | x)`` and ``w_1 =
p(beta = 1 | x)``, computed in log space by :mod:`pemc_stan.methods.tempering`:

* ``log Z = log zeta + log mean w_1 - log mean w_0`` (eq 20), with a standard
  error from the delta method and the autocorrelation- and
  between-chain-aware ESS of the influence values
  (:func:`pemc_stan.methods.continuous_tempering.tempering.log_z_estimate`);
* target expectations ``sum w_1 f / sum w_1`` (eq 21) and base expectations
  ``sum w_0 f / sum w_0`` (eq 22), the latter compared with the Gaussian
  base's known moments in base coordinates (a necessary convergence check);
* resampled draws of the original parameters: within each chain, systematic
  resampling with probabilities ``w_1`` (so chains stay chains and the draw
  order is kept), with the original model's transformed parameters and
  generated quantities recomputed by standalone ``generate_quantities``;
* temperature diagnostics: the share of draws near ``beta = 0`` and ``beta =
  1`` and the number of round trips between them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Literal

import cmdstanpy
import numpy as np
import pandas as pd
from numpy.typing import NDArray

import pemc_stan.methods.continuous_tempering.tempering as T
from pemc_stan.core.base_density import BaseDensity
from pemc_stan.errors import ContinuousTemperingDiagnosticWarning
from pemc_stan.estimators import weights as W
from pemc_stan.estimators.log_z import EvidenceEstimate, compare
from pemc_stan.estimators.tails import tail_fields
from pemc_stan.methods.continuous_tempering.cells import (
    MODE_ACCEPT_RATIO,
    join_crossed_cells,
    lowest_acceptance_ratio,
)
from pemc_stan.methods.continuous_tempering.transform import ContinuousTemperingResult
from pemc_stan.methods.tempering import FLAT, BetaBias, delta
from pemc_stan.output.diagnostics import (
    CHAIN_Z_MAX,
    ESS_MIN,
    Note,
    Reason,
    chains_disagree,
    treedepth_advice,
)
from pemc_stan.sampling.fit import ExtendedFit
from pemc_stan.sampling.hooks import OutputExtras, WeightedEstimate
from pemc_stan.sampling.marginal import averaged
from pemc_stan.sampling.model import Found
from pemc_stan.sampling.views import NamedView

logger = logging.getLogger(__name__)

__all__ = ["ContinuousTemperingFit", "NEAR_ZERO", "NEAR_ONE"]

NEAR_ZERO = 0.05
NEAR_ONE = 0.95
#: Least share of the draws near each end of beta (below NEAR_ZERO, above NEAR_ONE).
BETA_END_SHARE_MIN = 0.01
#: Fewest round trips of beta between the two ends in every chain.
ROUND_TRIPS_MIN = 1
#: Largest standardised eq-22 discrepancy of the base moments of an ``ok`` fit.
BASE_Z_MAX = 4.5
#: iid base draws for the base masses of the post-stratification regions (binomial
#: error ~ 1e-3 on a mass of 0.5, included in the standard errors).
MASS_DRAWS = 200_000


class ContinuousTemperingFit(ExtendedFit):
    """A continuously tempered MCMC fit.

    Parameters
    ----------
    fit
        The cmdstanpy fit of the CT program.
    result
        The :class:`~pemc_stan.methods.continuous_tempering.transform.ContinuousTemperingResult`.
    log_zeta
        The ``pemc_log_zeta`` used.
    base
        The Gaussian base density used (None under likelihood tempering).
    data
        The user's data.
    original_model
        The compiled original model or a callable returning it (for
        :meth:`resampled_draws_pd`).
    seed
        Seed of the resampling.
    history
        One dict per bootstrap round before this run (``round``, ``log_zeta``, ``log_z``,
        ``std_error``, ``log_z_problems``: the names of that round's failed
        :meth:`round_log_z_problems`; an earlier round without any is compared with
        this one, ``log_z_rounds``).  :attr:`history` adds this run's own record
        (:meth:`round_record`).
    mode_centres
        ``(K, D)`` centres in base coordinates of the modes the pilot found;
        with two or more, the estimates are post-stratified by their cells
        (:meth:`strata`).
    bias
        The :class:`~pemc_stan.methods.tempering.BetaBias`
        ``g(beta)`` of the run (default: none).
    round
        This run's index among the bootstrap rounds (default: ``len(history)``).
    pilot_notes
        ``(name, message, remedy)`` of the pilots that failed or fell back.
    search
        How widely the pilot searched for modes and what it found
        (:class:`~pemc_stan.core.search.ModeSearch`): the ``unvisited_modes`` check
        compares its modes with where the chains went.
    round_settings
        This run's ``iter_warmup`` and ``iter_sampling``, for its :meth:`round_record`.
    found
        What the pilot found (:class:`~pemc_stan.sampling.model.Found`): a follow-up's
        bootstrap step keeps covering its base (default: from the arguments above).

    Attributes
    ----------
    method, fit, result, data, log_zeta, base, history, mode_centres, bias, round, pilot_notes
    """

    result: ContinuousTemperingResult
    #: One draw per iteration, its target weight on one scale across all draws and chains.
    resampling: ClassVar[Literal["within_draw", "pooled"]] = "pooled"
    #: A run whose only flaw is that an earlier bootstrap round's ``log Z`` disagreed with
    #: its own is ok: its own checks all passed, and the earlier round (a shorter run from a
    #: rougher base and ``log zeta``) is the likelier to be wrong; the earlier estimates
    #: stay in the diagnostics (``bootstrap_log_z``).
    minor_reasons: ClassVar[frozenset[str]] = frozenset({"log_z_rounds"})

    def __init__(self, fit: cmdstanpy.CmdStanMCMC, result: ContinuousTemperingResult,
                 log_zeta: float, base: BaseDensity | None = None,
                 data: Mapping[str, Any] | None = None,
                 original_model: cmdstanpy.CmdStanModel | Callable[[], cmdstanpy.CmdStanModel]
                 | None = None, seed: int | None = None,
                 history: Sequence[Mapping[str, Any]] | None = None,
                 mode_centres: Any = None, bias: BetaBias | None = None,
                 round: int | None = None,
                 pilot_notes: Sequence[tuple[str, str, str]] = (),
                 round_settings: Mapping[str, Any] | None = None,
                 search: Any = None, found: Found | None = None) -> None:
        super().__init__(fit, result, data=data, original_model=original_model, seed=seed)
        self.log_zeta = float(log_zeta)
        self.base = base
        self._earlier = [dict(h) for h in history or []]
        #: This run's index among the bootstrap rounds (default: ``len(history)``); the
        #: rounds of ``history`` before it are checked against :meth:`log_z`.
        self.round = len(self._earlier) if round is None else int(round)
        #: ``(name, message, remedy)`` of pilots that failed or fell back.
        self.pilot_notes: tuple[tuple[str, str, str], ...] = tuple(pilot_notes)
        self.round_settings = dict(round_settings or {})
        #: How widely the pilot searched for modes
        #: (:class:`~pemc_stan.core.search.ModeSearch`, or None).
        self.search = search
        self.found = found if found is not None else Found(
            base=base, log_scale=log_zeta, search=search,
            notes=tuple(Note(*n) for n in pilot_notes), mode_centres=mode_centres)
        names = set(result.parameter_names)
        self._param_columns = [c for c in self._columns if c.split("[")[0] in names]
        self._particles = {c: [c] for c in self._param_columns}
        self.mode_centres = None if mode_centres is None else np.atleast_2d(
            np.asarray(mode_centres, dtype=float))
        self._strata: T.Strata | None | bool = False  # False: not computed yet
        self.bias = bias or FLAT
        self._record: dict[str, Any] | None = None

    @property
    def history(self) -> list[dict[str, Any]]:
        """One dict per bootstrap round: the rounds before this run, then this run's own
        :meth:`round_record` (when it is the last)."""
        if self.round < len(self._earlier):
            return [dict(h) for h in self._earlier]
        return [*(dict(h) for h in self._earlier), self.round_record()]

    def round_record(self) -> dict[str, Any]:
        """This run's entry of :attr:`history`: its base, ``log zeta``, settings, eq-20
        ``log Z`` with its failed checks, and the shares of draws near each end of beta."""
        if self._record is None:
            est = self.log_normaliser()
            beta = self.beta()
            self._record = {
                "round": self.round,
                "base": "prior" if self.base is None
                else str(self.base.info.get("method", "given")),
                "log_zeta": self.log_zeta, **self.round_settings,
                "log_z": est.log_z, "std_error": est.std_error,
                "log_z_problems": self.round_log_z_problems(),
                "share_near_1": float(np.mean(beta > 0.95)),
                "share_near_0": float(np.mean(beta < 0.05)),
                "beta_bias": "flat" if self.bias.is_flat else "length",
                "gradients": self.run_gradients()}
        return dict(self._record)

    def gradients(self) -> int:
        """Gradient evaluations of this run and of the bootstrap rounds before it
        (:meth:`~pemc_stan.sampling.fit.ExtendedFit.run_gradients` each).

        Raises
        ------
        Nothing.
        """
        earlier = sum(int(h.get("gradients", 0)) for h in self._earlier[:self.round])
        return earlier + self.run_gradients()

    # ------------------------------------------------------------------ #
    # raw quantities, (chains, draws)
    # ------------------------------------------------------------------ #

    def beta(self) -> NDArray[np.float64]:
        """Inverse temperatures ``beta = logistic(u)``, shape (chains, draws)."""
        return T.beta_of_u(self._column("pemc_u"))

    def log_gamma(self) -> NDArray[np.float64]:
        """``log gamma(x)`` (full model log density, constants, no Jacobian), (chains, draws)."""
        return self._column("pemc_log_gamma")

    def log_base(self) -> NDArray[np.float64]:
        """``log b(x)`` (normalised base; the prior under likelihood tempering)."""
        return self._column("pemc_log_base")

    def base_z(self) -> NDArray[np.float64]:
        """The base coordinates ``z(x)`` of every draw, shape (chains, draws, D).

        D is 0 under likelihood tempering (the program has no ``pemc_z``).
        """
        names = [c for c in self._columns if c.startswith("pemc_z[")]
        if not names:
            return np.zeros((*self._column("pemc_u").shape, 0))
        return np.stack([self._column(c) for c in names], axis=-1)

    def delta(self) -> NDArray[np.float64]:
        """``Delta(x) = log zeta + log b(x) - log gamma(x)`` (eq 17), shape (chains, draws)."""
        if self.result.options.temper == "likelihood":
            return delta(self._column("pemc_log_lik"), self.log_zeta, 0.0)
        return delta(self.log_gamma(), self.log_zeta, self.log_base())

    def strata(self) -> T.Strata | None:
        """The regions the estimates are post-stratified by, or None (one region).

        The cells of the pilot's modes (nearest centre in the base's metric,
        :meth:`BaseDensity.nearest_centre`), their base masses from
        ``MASS_DRAWS`` iid base draws.  A cell without draws of this run or
        without base mass is merged into its neighbours (its centre is
        dropped).  Cells that are not separate modes are joined: when the
        chains step from one cell into another between consecutive draws both
        at ``beta > 0.5`` at least ``cells.MERGE_CROSSINGS`` times and at least
        ``cells.MERGE_RATE`` times as often as independent draws would (isolated modes
        are crossed only near the base, or rarely where a barrier is low), the
        two count as one region (Pathfinder paths of one skewed,
        high-dimensional mode often end apart); a cell with
        fewer than ``cells.MIN_CELL_DRAWS`` draws joins a neighbour.  See
        :mod:`pemc_stan.methods.continuous_tempering.tempering` for why: the
        regions' shares of ``Z`` then come from the known base masses and the
        draws inside each region, not from how often the chains changed mode.
        """
        if self._strata is not False:
            return self._strata  # type: ignore[return-value]
        out: T.Strata | None = None
        centres = self.mode_centres
        if (self.base is not None and centres is not None and centres.shape[0] > 1
                and centres.shape[1] == self.base.dim
                and self.result.options.temper == "posterior"):
            dim = self.base.dim
            z = self.base_z()
            shape = z.shape[:2]
            rng = np.random.default_rng([0 if self.seed is None else int(self.seed), 22,
                                         self.round])
            while centres.shape[0] > 1:
                labels = self.base.nearest_centre(z.reshape(-1, dim), centres).reshape(shape)
                mass = self.base.centre_masses(centres, MASS_DRAWS, rng)
                empty = (mass <= 0) | (np.bincount(labels.ravel(), minlength=mass.size) == 0)
                if not np.any(empty):
                    labels, mass = join_crossed_cells(labels, mass, self.beta(),
                                                       self.log_weights_base())
                    if mass.size > 1:
                        out = T.Strata(labels, np.log(mass), MASS_DRAWS)
                    break
                centres = centres[~empty]
        self._strata = out
        return out

    def log_weights(self) -> NDArray[np.float64]:
        """Log target weights per draw, (chains, draws): ``log w_1(x) = log p(beta = 1 | x)``
        of eq 20, post-stratified by the pilot's modes when it found several
        (:meth:`strata`; the weights are then ``w_1 b_k / E[w_0 1_k]`` up to a constant)."""
        return T.stratified_log_w1(self.delta(), self.strata(), self.bias)

    def log_weights_base(self) -> NDArray[np.float64]:
        """``log w_0(x) = log p(beta = 0 | x)`` of eq 20 per draw, (chains, draws)."""
        return self.bias.log_w_pair(self.delta())[0]

    def run_log_z(self) -> EvidenceEstimate:
        """``log Z`` by eq 20 with its Monte-Carlo standard error: :meth:`log_normaliser`,
        refused as :func:`pemc_stan.evidence` refuses it when the prior is improper.

        Returns
        -------
        EvidenceEstimate

        Raises
        ------
        ImproperPriorError
            If a parameter has a flat, improper prior (:meth:`log_z_undefined`): the
            evidence is then undefined.
        """
        undefined = self.log_z_undefined()
        if undefined is not None:
            raise undefined
        return self.log_normaliser()

    def log_normaliser(self) -> EvidenceEstimate:
        """``log`` of the normalising constant of the density as written, by eq 20 with its
        Monte-Carlo standard error (also when the prior is improper: the bootstrap sets
        ``log zeta`` from it; as the evidence it is :meth:`log_z`).

        Only this run's draws count (the final bootstrap round's).  Pooling the
        rounds' estimates by their inverse variances was rejected: its intervals
        covered the truth less often than the final round's alone
        (docs/decisions.md).  The earlier rounds are instead a check
        (``log_z_rounds``).

        Returns
        -------
        EvidenceEstimate
            See :func:`pemc_stan.methods.continuous_tempering.tempering.log_z_estimate`;
            under likelihood tempering this is ``log int p L - log int p`` (the evidence for a
            normalised prior).
        """
        return T.log_z_estimate(self.delta(), self.log_zeta, strata=self.strata(),
                                bias=self.bias)

    def _earlier_rounds(self) -> list[tuple[int, EvidenceEstimate, list[str]]]:
        """``(round, eq-20 estimate, failed checks)`` of the bootstrap rounds before this run."""
        out: list[tuple[int, EvidenceEstimate, list[str]]] = []
        for h in self._earlier[:self.round]:
            if "log_z" in h and "std_error" in h:
                est = EvidenceEstimate(float(h["log_z"]), float(h["std_error"]), "ct_eq20")
                out.append((int(h.get("round", len(out))), est,
                            list(h.get("log_z_problems", []))))
        return out

    def particle_log_weights(self) -> NDArray[np.float64]:
        """``log w_1`` as one particle per draw, shape (chains, draws, 1)."""
        return self.log_weights()[..., None]

    def particle_coordinates(self) -> NDArray[np.float64] | None:
        """Base coordinates of every draw (None without a base)."""
        return None if self.base is None else self.base_z().reshape(-1, self.base.dim)

    def evidence_estimate(self, estimator: str, **settings: Any) -> EvidenceEstimate:
        """``log Z`` by eq 20 (``"ct"``) or by thermodynamic integration over the
        reweighted beta draws (``"ti"``, grid of ``settings["ti_grid"]`` points).

        Raises
        ------
        ValueError
            For another estimator.
        ImproperPriorError
            For ``"ct"`` and ``"ti"`` when a parameter has a flat, improper prior.
        """
        if estimator == "ct":
            return self.run_log_z()
        if estimator == "ti":
            undefined = self.log_z_undefined()
            if undefined is not None:
                raise undefined
            return T.ct_thermodynamic_integration(self.delta(), self.log_zeta, bias=self.bias,
                                                  n_grid=int(settings.get("ti_grid", 101)))
        return super().evidence_estimate(estimator, **settings)

    # ------------------------------------------------------------------ #
    # expectations
    # ------------------------------------------------------------------ #

    def particle_columns(self) -> dict[str, list[str]]:
        """Each original parameter column is its own (single) particle."""
        return self._particles

    def run_expectation(self, f: Callable[[Any], NDArray[np.float64]] | str
                        ) -> WeightedEstimate:
        """Target expectation ``E[f(x)]`` by eq 21, with its Monte-Carlo standard error.

        Parameters
        ----------
        f
            A column of an original parameter (``"mu"``, ``"theta[2]"``) for its
            mean, or a callable taking a view ``column -> (chains, draws)``
            and returning an array of that shape.

        Returns
        -------
        WeightedEstimate
            ``mean``, ``mcse`` (delta method, ArviZ mean-ESS over chains) and
            ``ess`` (``weighted variance / mcse^2``).

        Raises
        ------
        KeyError
            For an unknown column.
        """
        values = averaged(self, (lambda v: v[f]) if isinstance(f, str) else f, _DrawView)
        d = self.delta()
        est = T.weighted_expectations(values, d, "target", strata=self.strata(), bias=self.bias)
        lw = self.log_weights()
        wn = np.exp(lw - np.max(lw))
        wn = wn / wn.sum()
        var = float(np.sum(wn * (values - float(est.mean)) ** 2))
        mcse = float(est.std_error)
        ess = var / mcse**2 if mcse > 0 else float("nan")
        return WeightedEstimate(mean=float(est.mean), mcse=mcse, ess=ess,
                                **tail_fields(wn * (values - float(est.mean))))

    def base_expectations(self) -> pd.DataFrame:
        """Eq 22 estimates of the base's mean and variance in base coordinates vs the known ones.

        Post-stratified like the target estimates (:meth:`strata`): each cell of
        the pilot's modes gets its known base mass, so the check is of the
        sampling within the cells, which is what the stratified estimates rely on.

        Returns
        -------
        pandas.DataFrame
            One row per base coordinate: ``known_mean``, ``mean``, ``mean_mcse``,
            ``mean_z`` (standardised difference), ``known_var``, ``var``,
            ``var_mcse``, ``var_z``.  Empty under likelihood tempering (the
            prior's moments are not known in closed form).
        """
        if self.base is None or self.result.options.temper == "likelihood":
            return pd.DataFrame(columns=["known_mean", "mean", "mean_mcse", "mean_z",
                                         "known_var", "var", "var_mcse", "var_z"])
        d = self.delta()
        dim = self.base.dim
        z = self.base_z()
        m = np.asarray(self.base.mean)
        v = self.base.variances
        st = self.strata()
        em = T.weighted_expectations(z, d, "base", strata=st, bias=self.bias)
        ev = T.weighted_expectations((z - m) ** 2, d, "base", strata=st, bias=self.bias)
        names = self.result.coordinates.coordinate_names(self.data)
        with np.errstate(divide="ignore", invalid="ignore"):
            df = pd.DataFrame({
                "known_mean": m, "mean": em.mean, "mean_mcse": em.std_error,
                "mean_z": (em.mean - m) / em.std_error,
                "known_var": v, "var": ev.mean, "var_mcse": ev.std_error,
                "var_z": (ev.mean - v) / ev.std_error,
            }, index=pd.Index(names[:dim], name="coordinate"))
        return df

    # ------------------------------------------------------------------ #
    # diagnostics
    # ------------------------------------------------------------------ #

    def round_trips(self) -> int:
        """Round trips ``beta ~ 0 -> beta ~ 1 -> beta ~ 0`` (or the reverse), summed over chains.

        A draw is at an end when ``beta < NEAR_ZERO`` or ``beta > NEAR_ONE``;
        each change of the end last visited is a crossing and two crossings
        make a round trip.
        """
        return int(sum(self.round_trips_per_chain()))

    def round_trips_per_chain(self) -> list[int]:
        """Round trips of each chain (see :meth:`round_trips`)."""
        out = []
        for chain in self.beta():
            last = None
            crossings = 0
            for b in chain:
                end = 0 if b < NEAR_ZERO else 1 if b > NEAR_ONE else None
                if end is None:
                    continue
                if last is not None and end != last:
                    crossings += 1
                last = end
            out.append(crossings // 2)
        return out

    def chain_expectations(self, column: str) -> tuple[NDArray[np.float64],
                                                       NDArray[np.float64]]:
        """Each chain's eq-21 estimate of the mean of ``column`` and its standard error."""
        values, d = self._column(column), self.delta()
        means, ses = [], []
        for c in range(values.shape[0]):
            est = T.weighted_expectations(values[c:c + 1], d[c:c + 1], "target", bias=self.bias)
            means.append(float(est.mean))
            ses.append(float(est.std_error))
        return np.asarray(means), np.asarray(ses)

    def mode_acceptance(self) -> tuple[float, int] | None:
        """The lowest ratio of a mode cell's mean acceptance statistic at ``beta > 0.5`` to
        the other cells', and that cell; None without two cells of the pilot's modes with
        :data:`~pemc_stan.methods.continuous_tempering.cells.MODE_ACCEPT_DRAWS` such draws.

        One step size serves every mode: in a mode much narrower than the rest, the
        leapfrog steps are rejected, so the chains at high beta avoid it and its mass is
        underestimated while every chain-level check passes.

        Raises
        ------
        Nothing.
        """
        centres = self.mode_centres
        if self.base is None or centres is None or centres.shape[0] < 2:
            return None
        beta = self.beta()
        hot = beta > 0.5
        z = self.base_z().reshape(-1, self.base.dim)
        cells = self.base.nearest_centre(z, centres).reshape(beta.shape)
        return lowest_acceptance_ratio(cells, hot, self._column("accept_stat__"),
                                       centres.shape[0])

    def method_checks(self) -> Iterator[tuple[str, Reason | None]]:
        """The pilot, temperature, weights, acceptance by mode, eq-22 and log Z checks."""
        for name, message, remedy in self.pilot_notes:
            if name == "pilot":  # a failed fit of the base that another one replaced is no fault
                yield name, Reason(name, message, remedy)
        found = self.mode_acceptance()
        yield "mode_acceptance", None if found is None or found[0] >= MODE_ACCEPT_RATIO \
            else Reason("mode_acceptance", f"at beta > 0.5 the chains' mean acceptance in "
                        f"mode {found[1] + 1} of the pilot's is {found[0]:.2f} times that "
                        "in the others: the step size is too large for that mode, so the "
                        "chains avoid it and its mass is underestimated",
                        "raise adapt_delta (a smaller step size)")
        yield from self._round_log_z_checks()
        lw = self.log_weights()
        kish = float(W.ess(lw.reshape(-1)))
        yield "weight_ess", None if kish >= ESS_MIN else Reason(
            "weight_ess", f"the Kish ESS of the target weights w_1 is {kish:.0f} "
            f"(< {ESS_MIN:.0f})", "run longer (iter_sampling) or improve log zeta")
        # No Pareto k-hat: w_1 = p(beta = 1 | x) <= 1 is bounded, so the weights always have
        # finite variance; k-hat of bounded weights flags skew, not failure.
        base_df = self.base_expectations()
        if len(base_df):
            zs = np.abs(np.concatenate([base_df["mean_z"].to_numpy(),
                                        base_df["var_z"].to_numpy()]))
            zs = zs[np.isfinite(zs)]
            worst = float(np.max(zs)) if zs.size else 0.0
            yield "base_moments", None if worst <= BASE_Z_MAX else Reason(
                "base_moments", f"the eq-22 estimates of the base's moments are {worst:.1f} "
                "standard errors from the known ones: the joint (x, beta) chains have not "
                "converged", "increase iter_warmup / iter_sampling or adapt_delta")
        # an earlier round that passed its own log-Z checks is an independent estimate of the
        # same log Z (its base, log zeta and bias differ): far apart, an error bar is wrong
        own = self.log_normaliser()
        gaps: list[tuple[float, int]] = []
        for r, est, problems in self._earlier_rounds():
            if problems:
                continue
            both = (est.log_z, est.std_error, own.log_z, own.std_error)
            if all(np.isfinite(both)) and np.hypot(est.std_error, own.std_error) > 0:
                gaps.append((abs(compare(est, own).z_score), r))
        if gaps:
            z, r = max(gaps)
            yield "log_z_rounds", None if not z > CHAIN_Z_MAX else Reason(
                "log_z_rounds", f"the eq-20 estimates of log Z of bootstrap round {r} and of "
                f"the final round differ by {z:.1f} standard errors: the two runs saw "
                "different parts of the target, or an error bar is too small",
                "run longer (iter_sampling) or more bootstrap rounds")

    def _round_log_z_checks(self) -> Iterator[tuple[str, Reason | None]]:
        """The checks this run's own eq-20 estimate rests on: beta round trips per chain,
        both ends of the bridge visited, the chains' estimates agreeing."""
        trips = self.round_trips_per_chain()
        yield "beta_round_trips", None if min(trips) >= ROUND_TRIPS_MIN else Reason(
            "beta_round_trips", f"round trips of beta between {NEAR_ZERO} and {NEAR_ONE} per "
            f"chain: {trips}; a chain without one cannot have moved between modes through the "
            "base", "run longer (iter_sampling) or more bootstrap rounds (bootstrap_rounds)"
            + ("" if self.result.options.covariance_form == "dense"
               or self.result.options.temper == "likelihood"
               else ", or use base_covariance='dense'"))
        beta = self.beta()
        near = (float(np.mean(beta < NEAR_ZERO)), float(np.mean(beta > NEAR_ONE)))
        yield "beta_ends", None if min(near) >= BETA_END_SHARE_MIN else Reason(
            "beta_ends", f"{100 * near[0]:.1f}% of the draws have beta < {NEAR_ZERO} and "
            f"{100 * near[1]:.1f}% beta > {NEAR_ONE}: one end of the bridge is rarely "
            "visited, so log zeta is far from log Z or the base far from the target",
            "run more bootstrap rounds, or pass log_zeta close to log Z")
        if beta.shape[0] > 1:
            d = self.delta()
            per = [T.log_z_estimate(d[c:c + 1], self.log_zeta, bias=self.bias)
                   for c in range(beta.shape[0])]
            z = chains_disagree(np.array([e.log_z for e in per]),
                                np.array([e.std_error for e in per]))
            yield "log_z_chains", None if not z > CHAIN_Z_MAX else Reason(
                "log_z_chains", f"the chains' eq-20 estimates of log Z differ by up to {z:.1f} "
                "standard errors: the chains saw different parts of the target",
                "run longer or more bootstrap rounds")

    def round_log_z_problems(self) -> list[str]:
        """Names of the failed checks this run's own eq-20 estimate rests on
        (``beta_round_trips``, ``beta_ends``, ``log_z_chains``); a bootstrap round
        with any is not compared with the later rounds (``log_z_rounds``)."""
        return [name for name, reason in self._round_log_z_checks() if reason is not None]

    def diagnostics(self, warn: bool = True) -> dict[str, Any]:
        """Temperature, weight and convergence diagnostics, with advice.

        Returns
        -------
        dict
            ``share_near_0`` / ``share_near_1`` (draws with ``beta < 0.05`` /
            ``> 0.95``), ``beta_mean``, ``round_trips`` (all chains),
            ``round_trips_per_chain``, ``weight_ess`` (Kish ESS of ``w_1``),
            ``base_weight_ess`` (of ``w_0``), ``log_z``, ``log_z_se`` (when the prior is
            improper ``log_z`` is the string ``"undefined (improper prior)"`` and neither
            ``log_z_se`` nor the ``bootstrap_`` entries are given),
            ``log_z_minus_log_zeta``, ``base_moment_max_abs_z`` (largest
            standardised eq-22 discrepancy, NaN under likelihood tempering),
            ``divergences``, ``max_treedepth_hits`` (transitions stopped at
            ``max_treedepth``), ``messages`` (advice), ``bootstrap_log_z`` /
            ``bootstrap_log_z_se`` (every bootstrap round's eq-20 estimate).
        """
        beta = self.beta()
        n_chains = beta.shape[0]
        lz = self.log_normaliser()
        nuts = self.nuts_counts()
        divergences = nuts.divergences
        base_df = self.base_expectations()
        if len(base_df):
            zs = np.abs(np.concatenate([base_df["mean_z"].to_numpy(),
                                        base_df["var_z"].to_numpy()]))
            zs = zs[np.isfinite(zs)]
            max_z = float(np.max(zs)) if zs.size else float("nan")
        else:
            max_z = float("nan")
        trips = self.round_trips()
        info: dict[str, Any] = {
            "share_near_0": float(np.mean(beta < NEAR_ZERO)),
            "share_near_1": float(np.mean(beta > NEAR_ONE)),
            "beta_mean": float(np.mean(beta)),
            "round_trips": trips,
            "round_trips_per_chain": trips / n_chains,
            "weight_ess": float(W.ess(self.log_weights().reshape(-1))),
            "base_weight_ess": float(W.ess(self.log_weights_base().reshape(-1))),
            "log_z": lz.log_z,
            "log_z_se": lz.std_error,
            "bootstrap_log_z": [float(h["log_z"]) for h in self.history if "log_z" in h],
            "bootstrap_log_z_se": [float(h["std_error"]) for h in self.history
                                   if "std_error" in h],
            "log_z_minus_log_zeta": lz.log_z - self.log_zeta,
            "base_moment_max_abs_z": max_z,
            "divergences": divergences,
            "max_treedepth_hits": nuts.max_treedepth_hits,
        }
        if self.log_z_undefined() is not None:  # an improper prior: no log Z as a number
            for key in ("log_z_se", "bootstrap_log_z", "bootstrap_log_z_se"):
                del info[key]
            info["log_z"] = "undefined (improper prior)"
        msgs: list[str] = []
        gap = info["log_z_minus_log_zeta"]
        if info["share_near_1"] < 0.01:
            msgs.append(
                f"only {100 * info['share_near_1']:.1f}% of the draws have beta > {NEAR_ONE}: "
                f"the target is rarely visited (estimated log Z - log zeta = {gap:.2f}; "
                "p(beta=1)/p(beta=0) = Z/zeta). Run more bootstrap rounds (bootstrap_rounds) "
                "or pass log_zeta close to the estimated log Z; if log Z - log zeta is near 0, "
                "the base is far from the target: try another base= (or base_covariance="
                "'dense').")
        if info["share_near_0"] < 0.01:
            msgs.append(
                f"only {100 * info['share_near_0']:.1f}% of the draws have beta < {NEAR_ZERO}: "
                "the base is rarely visited, so the chain cannot move between modes through "
                f"it (estimated log Z - log zeta = {gap:.2f}). Run more bootstrap rounds or "
                "pass log_zeta close to the estimated log Z.")
        dense = self.result.options.covariance_form == "dense"
        closer = ("" if dense or self.result.options.temper == "likelihood"
                  else ", or use base_covariance='dense' (a base closer to the target)")
        if info["round_trips_per_chain"] < 1:
            msgs.append(
                f"{trips} round trips between beta < {NEAR_ZERO} and beta > {NEAR_ONE} over "
                f"{n_chains} chains: the temperature does not mix, so estimates may miss "
                f"modes. Increase iter_sampling or run more bootstrap rounds{closer}.")
        if np.isfinite(max_z) and max_z > BASE_Z_MAX:
            msgs.append(
                f"the eq-22 base moments disagree with the base's known moments (largest "
                f"standardised difference {max_z:.1f}): the chains have not converged on the "
                "joint (x, beta) target. Increase iter_warmup/iter_sampling or adapt_delta.")
        if info["weight_ess"] < 100:
            msgs.append(
                f"the Kish ESS of the target weights w_1 is {info['weight_ess']:.0f}: few draws "
                "carry the target estimates. Increase iter_sampling or improve log zeta.")
        if divergences:
            msgs.append(f"{divergences} divergent transitions: increase adapt_delta (e.g. "
                        f"0.95){closer}.")
        msgs += [f"{message} ({remedy})" for _, message, remedy in self.pilot_notes]
        deeper = treedepth_advice(nuts)
        if deeper:
            msgs.append(deeper)
        return self._report(info, msgs, warn, ContinuousTemperingDiagnosticWarning)

    # ------------------------------------------------------------------ #
    # output
    # ------------------------------------------------------------------ #

    def output_extras(self) -> OutputExtras:
        """``pemc_log_zeta`` (attribute) and ``log_zeta`` (setting) of the last round;
        sample stats ``beta``, ``delta``, ``log_weight`` (``log w1``), ``weight``
        (normalised over all draws) and the attribute ``weight_ess`` (the extended draws'
        group does not repeat them: each draw kept once)."""
        lw = np.asarray(self.log_weights(), dtype=float)
        finite = np.isfinite(lw)
        w = np.zeros_like(lw)
        if np.any(finite):
            w[finite] = np.exp(W.log_normalise(lw[finite]))
        both = ("chain", "draw")
        ess = 1.0 / float(np.sum(w ** 2)) if np.any(finite) else float("nan")
        beta = np.asarray(self.beta(), dtype=float)
        delta = np.asarray(self.delta(), dtype=float)
        return OutputExtras(
            attributes={"pemc_log_zeta": float(self.log_zeta)},
            settings={"log_zeta": float(self.log_zeta)},
            sample_stats={"beta": (both, beta), "delta": (both, delta),
                          "log_weight": (both, lw), "weight": (both, w)},
            sample_stats_attrs={"weight_ess": ess})



class _DrawView(NamedView):
    """``view["x"]`` -> draws of column ``x``, shape (chains, draws); ``view["omega"]``,
    a whole parameter, shape (chains, draws, *its shape)."""

    def __init__(self, fit: ContinuousTemperingFit, draw: int = 0) -> None:
        super().__init__(lambda column: fit.particles(column, draw)[..., 0],
                         [*fit.particle_columns(), *fit.program.marginalised])
