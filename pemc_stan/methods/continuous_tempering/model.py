"""Running continuous tempering: the base density and log zeta, NUTS, the bootstrap.

The base density and ``log zeta`` are fitted on the original model (section 6
of Graham & Storkey: multi-path Pathfinder by default, paths grouped by mode
(:func:`pemc_stan.backend.pathfinder.group_paths`) and combined as the
moment-matched mixture of eq 25; ADVI or Laplace selectable), then the CT
program is run and, for ``bootstrap_rounds`` more rounds, the base is re-fitted
to the eq-21 weighted draws and ``log zeta`` set to the eq-20 estimate (by
importance sampling from the re-fitted base after a round that stayed near beta = 1),
stopping early once ``log Z`` moves by less than ``bootstrap_tol`` combined
standard errors.
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import cmdstanpy
import numpy as np
from numpy.typing import NDArray

from pemc_stan.backend.progress import stage
from pemc_stan.backend.standalone import generated_column
from pemc_stan.core.base_density import BaseDensity, covering, moment_match
from pemc_stan.methods.continuous_tempering.fit import ContinuousTemperingFit
from pemc_stan.methods.continuous_tempering.options import ContinuousTemperingOptions
from pemc_stan.methods.continuous_tempering.tempering import log_z_estimate, pooled_log_ratio
from pemc_stan.methods.continuous_tempering.transform import ContinuousTemperingResult
from pemc_stan.methods.tempering import BetaBias, length_bias
from pemc_stan.modes.density import GeneratedDensity, exact_round_trip
from pemc_stan.modes.pilot import BasePilot
from pemc_stan.output.diagnostics import Note
from pemc_stan.sampling.fit import ExtendedFit
from pemc_stan.sampling.model import Found, MethodModel

logger = logging.getLogger(__name__)

__all__ = ["ContinuousTemperingModel"]


class ContinuousTemperingModel(MethodModel):
    """A Stan model prepared for continuous tempering (Graham & Storkey 2017).

    Parameters
    ----------
    result
        The CT transformation of the user's program (from the registry's
        ``transform_program``).
    data
        The model's data (dict or JSON path).
    original_model
        The user's compiled program, if they gave one.

    Raises
    ------
    DataError
        For data that do not match the data block (before anything is compiled).
    ValueError
        When the base coordinates' sizes or bounds cannot be evaluated from the data.
    """

    result: ContinuousTemperingResult
    refits_bridge = True  # each follow-up is a bootstrap round (:meth:`continue_from`)

    def __init__(self, result: ContinuousTemperingResult, data: Any = None,
                 original_model: cmdstanpy.CmdStanModel | None = None) -> None:
        super().__init__(result, data, original_model)
        if self.result.options.temper == "posterior":
            self.dim = self.result.coordinates.dim(self.data)  # sizes must come from data

    def ct_model(self) -> cmdstanpy.CmdStanModel:
        """The compiled CT program (cached by content hash)."""
        return self.method_model()

    def pilot(self) -> BasePilot:
        """A fresh pilot of the base and ``log zeta``, with this model's options."""
        opts: ContinuousTemperingOptions = self.result.options
        return BasePilot(self, self.result.coordinates, num_paths=opts.num_paths,
                         draws=opts.base_draws, covariance=opts.covariance_form)

    def wants_split(self) -> bool:
        """The split is tried under posterior tempering with a base the pilot fits."""
        opts: ContinuousTemperingOptions = self.result.options
        return (opts.split_modes == "auto" and opts.temper == "posterior"
                and not isinstance(opts.base, BaseDensity))

    def fit_base(self, seed: int | None = None) -> tuple[BaseDensity | None, float]:
        """Initial base density and ``log zeta`` (:meth:`search_modes`).

        Raises
        ------
        RuntimeError
            If every approximation fails.
        """
        found = self.search_modes(seed)
        return found.base, found.log_scale

    def search_modes(self, seed: int | None) -> Found:
        """Initial base density and ``log zeta`` (section 6), with fallbacks, and the
        search for modes that made them (the distinct modes' centres post-stratify the
        fits' estimates, :class:`~pemc_stan.methods.continuous_tempering.tempering.Strata`;
        the bootstrap keeps covering the pilot's base when it found several).

        ``base="pathfinder"``: multi-path Pathfinder (no PSIS resampling) on
        the original model; paths are grouped by mode, each mode's draws
        moment-matched and the modes combined as the mixture of eq 25 with
        weights from their importance-sampling masses; ``log zeta = log
        sum_modes Z_m``.  ``"advi"`` / ``"laplace"``: the base is
        moment-matched to the approximation's draws and ``log zeta`` comes
        from the Pathfinder importance-sampling estimate.  A fixed
        ``BaseDensity`` is used as is.  ``options.log_zeta`` overrides the
        estimate.  When an approximation fails, the next one is tried
        (:class:`~pemc_stan.modes.pilot.BasePilot`); each failure is
        recorded in the notes and shown by the fit's diagnostics.

        Returns
        -------
        Found
            Its base is None under likelihood tempering (the base is the prior); its
            ``log_scale`` is ``log zeta``.

        Raises
        ------
        RuntimeError
            If every approximation fails (then NUTS itself cannot run the model).
        """
        opts: ContinuousTemperingOptions = self.result.options
        pilot = self.pilot()
        given = opts.base if isinstance(opts.base, BaseDensity) else None
        base, log_zeta = pilot.fit(
            seed, want_base=opts.temper == "posterior" and given is None,
            first=opts.base if isinstance(opts.base, str) else "pathfinder", base=given,
            log_z=opts.log_zeta)
        notes = [Note(*n) for n in pilot.notes]
        if base is not None:  # the program's tails (base_df) on the pilot's location and scale
            base = base.with_df(opts.base_df)
        if log_zeta is None:  # likelihood tempering without a Pathfinder estimate
            log_zeta = 0.0
            notes.append(Note("pilot", "no estimate of log zeta (Pathfinder failed), "
                              "so the first round started at log zeta = 0",
                              "pass log_zeta= or run more bootstrap rounds"))
        logger.debug("initial log zeta = %.6g (base %s)", log_zeta,
                    "prior" if base is None else base.info.get("method", "given"))
        return Found(base=base, log_scale=log_zeta, search=pilot.search, notes=tuple(notes),
                     mode_centres=pilot.mode_centres)
        return base, float(log_zeta)

    def _next_bias(self, fit: ContinuousTemperingFit, base: BaseDensity | None,
                   new_base: BaseDensity | None, log_zeta: float, new_zeta: float,
                   seed: int | None = None) -> BetaBias:
        """The next round's beta bias (:func:`length_bias`), from this round's draws.

        Under posterior tempering the round's draws are pooled with as many iid draws
        of the next base (:meth:`_base_draws_delta`, :func:`pooled_log_ratio`): only
        the round's draws near ``beta = 0`` represent the next bridge's ``beta = 0``
        end, a few percent of them on a multimodal target.
        """
        delta = fit.delta().reshape(-1)
        log_n = fit.bias.log_normaliser(delta)
        if new_base is None:
            return length_bias(delta + (new_zeta - log_zeta), -log_n)
        if new_base is base:
            log_b_next = fit.log_base().reshape(-1)
        else:
            z = fit.base_z().reshape(-1, self.dim)
            log_b_next = new_base.log_density_z(z) + fit._column("pemc_log_jacobian").reshape(-1)
        log_q_ratio = fit.log_base().reshape(-1) - log_b_next  # log b - log b'
        delta_next = new_zeta + log_b_next - fit.log_gamma().reshape(-1)
        extra = (None if base is None
                 else self._base_draws_delta(new_base, new_zeta, delta.size, seed))
        if base is None or extra is None:
            return length_bias(delta_next, -log_q_ratio - log_n)
        z_y, delta_y = extra
        q_ratio_y = base.log_density_z(z_y) - new_base.log_density_z(z_y)
        log_n_y = fit.bias.log_normaliser(delta_y - new_zeta + log_zeta + q_ratio_y)
        r_run, r_y = pooled_log_ratio(log_q_ratio, log_n, q_ratio_y, log_n_y)
        return length_bias(np.concatenate([delta_next, delta_y]), np.concatenate([r_run, r_y]))

    def own_density(self, fit: ExtendedFit) -> GeneratedDensity | None:
        """The CT program's own ``pemc_log_gamma`` (every constant) at arbitrary draws,
        with ``pemc_u = 0`` and ``fit``'s base and ``log zeta`` as data (they enter other
        generated quantities only): checks of ``fit`` compile no density program.  None
        for a fit without them (not this program's) or whose data cannot be rebuilt, and
        for a program with a parameter whose constraining transform does not survive
        ``generate_quantities``' round trip through the unconstrained scale at its edges
        (:func:`~pemc_stan.modes.density.exact_round_trip`; the density program declares
        its parameters unconstrained, :func:`~pemc_stan.modes.density.density_program`).

        Raises
        ------
        Nothing.
        """
        log_zeta = getattr(fit, "log_zeta", None)
        if log_zeta is None or not exact_round_trip(self.result.program.tree):
            return None
        try:
            data = self.result.data(self.data, log_zeta=log_zeta,
                                    base=getattr(fit, "base", None),
                                    bias=getattr(fit, "bias", None))
        except ValueError as exc:
            logger.info("the CT program cannot evaluate log gamma for checks: %s", exc)
            return None
        return GeneratedDensity(self.method_model(), data, {"pemc_u": 0.0}, f"{self.name}_ct")

    def _base_draws_delta(self, new_base: BaseDensity, new_zeta: float, n: int,
                          seed: int | None) -> tuple[NDArray[np.float64],
                                                     NDArray[np.float64]] | None:
        """``n`` iid draws of the next base (base coordinates) and their ``Delta'``.

        ``Delta'`` is the CT program's own ``pemc_delta`` under the next round's base and
        ``log zeta`` (standalone generated quantities; no other program is compiled).
        Draws where it cannot be evaluated are dropped; None when none is left or
        CmdStan fails (the bias then rests on the round's draws alone).
        """
        rng = np.random.default_rng(None if seed is None else seed + 7919)
        z = new_base.sample_z(n, rng)
        try:
            draws = dict(self.result.coordinates.inverse(z, self.data))
            draws["pemc_u"] = np.zeros(n)
            data = self.result.data(self.data, log_zeta=new_zeta, base=new_base)
            model = self.method_model()
            with tempfile.TemporaryDirectory(prefix="pemc_bias_") as tmp, \
                    self.messages_in_user_lines():
                delta = generated_column(model, data, draws, "pemc_delta", Path(tmp), "pemc_ct")
        except Exception as exc:
            logger.warning("evaluating Delta at draws of the next base failed (%s); the beta "
                           "bias rests on this round's draws alone", exc)
            return None
        ok = np.isfinite(delta)
        return (z[ok], delta[ok]) if np.any(ok) else None

    def _one_ended_zeta(self, fit: ContinuousTemperingFit, base: BaseDensity,
                        eq20: float, seed: int | None) -> float:
        """The next ``log zeta`` after a round that stayed at the target's end of the bridge.

        With (almost) no draws near beta = 0, eq 20 is a ratio of a sum to a
        near-empty one: it says that ``log Z`` lies above ``log zeta``, not where, and
        taken as the next ``log zeta`` it can overshoot so far that the next round sits
        at the other end.  The round's draws are then draws of the target, the next base
        is fitted to them, and ``log Z`` is estimated by importance sampling from that
        base (:meth:`~pemc_stan.modes.pilot.BasePilot.importance_log_z`); the eq-20
        value is kept when that fails.  (A round that stayed near beta = 0 sampled
        the base: a base re-fitted to those draws is no better, and importance
        sampling from a poor base underestimates ``log Z``, so eq 20 is kept.)
        """
        pilot = self.pilot()
        try:
            estimate = pilot.importance_log_z(base, seed)
        except Exception as exc:
            logger.warning("round %d stayed near beta = 1 and importance "
                           "sampling from the re-fitted base failed (%s); the next log zeta "
                           "is the eq-20 value", fit.round, exc)
            return eq20
        if not math.isfinite(estimate):
            return eq20
        logger.info("round %d stayed near beta = 1: next log zeta %.6g by "
                    "importance sampling from the re-fitted base (eq 20 gave %.6g)",
                    fit.round, estimate, eq20)
        return float(estimate)

    def _next_state(self, found: Found, fit: ContinuousTemperingFit, base: BaseDensity | None,
                    log_zeta: float, seed: int | None, history: list[dict[str, Any]]
                    ) -> tuple[BaseDensity | None, float, BetaBias | None]:
        """The next round's base, ``log zeta`` and beta bias, from this round's draws (the
        section-6 bootstrap step).

        ``log zeta`` is eq 20's estimate without the post-stratification (a cell whose
        sampling is incomplete can move the stratified estimate by nats, and a zeta
        that far off leaves the next round's chains at one end of the bridge), or
        :meth:`_one_ended_zeta` after a round that stayed near beta = 1.  The base is
        moment-matched to the eq-21 weighted draws (again without the
        post-stratification: one cell whose ``E[w0 1_k]`` rests on few draws would carry
        the whole re-fit); a given ``BaseDensity`` is kept.  When
        the pilot found several modes, or a refused split's chains widened the first
        round's base (``found.widened``), the re-fitted base is widened to cover that
        base as well (:func:`~pemc_stan.core.base_density.covering`): a round
        whose chains missed a narrow mode would otherwise re-fit a base without it, and
        every later round would miss it too, unnoticed by the final verdict.
        ``history[-1]`` (``fit``'s record) gets ``next_log_zeta`` when it was set so.
        """
        opts: ContinuousTemperingOptions = self.result.options
        new_zeta = log_z_estimate(fit.delta(), log_zeta, bias=fit.bias).log_z
        new: BaseDensity | None = base
        if opts.temper == "posterior" and not isinstance(opts.base, BaseDensity):
            z = fit.base_z().reshape(-1, self.dim)
            try:
                new = moment_match(z, fit.bias.log_w_pair(fit.delta())[1].reshape(-1),
                                   None, opts.covariance_form)
                if found.base is not None and (found.mode_centres is not None
                                               or found.widened):
                    new = covering(new, found.base)  # the first round's base
                new = new.with_df(opts.base_df)
                new.info.update({"method": "bootstrap", "round": fit.round + 1})
            except ValueError as exc:
                logger.warning("bootstrap re-fit of the base failed (%s); keeping the "
                               "previous base", exc)
                new = base
        last = history[-1]
        if ("beta_ends" in last["log_z_problems"] and new is not None
                and last["share_near_1"] > last["share_near_0"]):
            new_zeta = self._one_ended_zeta(fit, new, new_zeta, seed)
            last["next_log_zeta"] = new_zeta
        bias = (self._next_bias(fit, base, new, log_zeta, new_zeta, seed)
                if opts.beta_marginal == "length" else None)
        return new, new_zeta, bias

    def continue_from(self, fit: ContinuousTemperingFit,  # type: ignore[override]
                      iter_warmup: int, iter_sampling: int,
                      seed: int | None, output_dir: str | os.PathLike[str] | None = None,
                      show_progress: bool = False, **cmdstanpy_kwargs: Any
                      ) -> ContinuousTemperingFit:
        """One more round from where ``fit`` ended: the bootstrap step from its draws (the
        base, ``log zeta`` and beta bias re-fitted, :meth:`_next_state`), its chains
        started at draws of ``fit``; the rounds so far stay in the new fit's history.

        Raises
        ------
        RuntimeError
            If CmdStan fails.
        """
        history = fit.history
        base, log_zeta, bias = self._next_state(fit.found, fit, fit.base, fit.log_zeta, seed,
                                                history)
        cmdstanpy_kwargs.setdefault("inits", fit.continuation_inits())
        return self._run(fit.found, base, log_zeta, fit.fit.chains, iter_warmup, iter_sampling,
                         seed, output_dir, show_progress, history, bias, **cmdstanpy_kwargs)

    def _run(self, found: Found, base: BaseDensity | None, log_zeta: float, chains: int,
             iter_warmup: int, iter_sampling: int, seed: int | None,
             output_dir: str | os.PathLike[str] | None, show_progress: bool,
             history: list[dict[str, Any]], bias: BetaBias | None = None,
             **kw: Any) -> ContinuousTemperingFit:
        data = self.result.data(self.data, log_zeta=log_zeta, base=base, bias=bias)
        fit = self.run_nuts(data, chains, iter_warmup, iter_sampling, seed, output_dir,
                            show_progress, **kw)
        return ContinuousTemperingFit(
            fit, self.result, log_zeta, base=base, data=self.data,
            original_model=self.original_model, seed=seed, history=history,
            mode_centres=found.mode_centres, bias=bias, round=len(history),
            pilot_notes=found.notes, search=found.search, found=found,
            round_settings={"iter_warmup": iter_warmup, "iter_sampling": iter_sampling})

    def sample(self, chains: int = 4, iter_warmup: int = 1000, iter_sampling: int = 1000,
               seed: int | None = None, output_dir: str | os.PathLike[str] | None = None,
               show_progress: bool = False, found: Found | None = None,
               **cmdstanpy_kwargs: Any) -> ContinuousTemperingFit:
        """Run NUTS on the CT program from the pilot's base and log zeta (``found``, or
        :meth:`search_modes` when None), and bootstrap (section 6).

        After each run the base is moment-matched to the eq-21 weighted draws
        in base coordinates (diagonal or dense, as configured) and ``log zeta``
        set to the eq-20 estimate (:meth:`_one_ended_zeta` after a round that stayed
        near beta = 1), for up to ``options.bootstrap_rounds`` extra
        runs; the loop stops early when ``|log Z_r - log Z_{r-1}| <=
        bootstrap_tol * sqrt(se_r^2 + se_{r-1}^2)``.  A fixed ``BaseDensity``
        is not re-fitted (only ``log zeta`` is updated); a given ``log_zeta``
        with ``bootstrap_rounds=0`` is used as is.

        Parameters
        ----------
        chains, iter_warmup, iter_sampling, seed, output_dir, show_progress
            Passed to ``CmdStanModel.sample`` (every round; round ``r`` writes
            to ``output_dir/round_r`` when given; round 0 warms up
            ``options.round_warmup(0, iter_warmup)`` and draws
            ``options.round_sampling(0, iter_sampling)`` when bootstrap rounds follow).
        **cmdstanpy_kwargs
            Further ``CmdStanModel.sample`` arguments (``adapt_delta``, ...).

        Returns
        -------
        ContinuousTemperingFit
            The last round's fit; ``fit.history`` lists every round.

        Raises
        ------
        RuntimeError
            If CmdStan or the base fit fails.
        """
        opts: ContinuousTemperingOptions = self.result.options
        found = self.search_modes(seed) if found is None else found
        base, log_zeta = found.base, found.log_scale
        bias: BetaBias | None = None
        history: list[dict[str, Any]] = []
        fit: ContinuousTemperingFit | None = None
        for r in range(opts.bootstrap_rounds + 1):
            round_dir = None if output_dir is None else Path(output_dir) / f"round_{r}"
            round_seed = None if seed is None else seed + r
            draws = opts.round_sampling(r, iter_sampling)
            warmup = opts.round_warmup(r, iter_warmup)
            rounds = opts.bootstrap_rounds + 1
            with stage(f"CT round {r + 1} of {rounds}", bar=f"CT round {r + 1}/{rounds}",
                       announce=False):
                fit = self._run(found, base, log_zeta, chains, warmup, draws, round_seed,
                                round_dir, show_progress, history, bias, **cmdstanpy_kwargs)
            history.append(fit.round_record())
            est = fit.log_normaliser()  # log zeta's target: defined for any prior
            logger.info("CT round %d of %d: log zeta %.6g -> %s %.6g +/- %.3g", r + 1,
                        rounds, log_zeta, "log Z" if fit.log_z_undefined() is None else
                        "log normaliser (log Z is undefined: an improper prior)",
                        est.log_z, est.std_error)
            if r == opts.bootstrap_rounds:
                break
            if r > 0:
                prev = history[-2]
                if abs(est.log_z - prev["log_z"]) <= opts.bootstrap_tol * math.sqrt(
                        est.std_error**2 + prev["std_error"] ** 2):
                    logger.info("bootstrap converged after round %d of %d", r + 1, rounds)
                    break
            if not math.isfinite(est.log_z):
                break
            base, log_zeta, bias = self._next_state(found, fit, base, log_zeta, round_seed,
                                                    history)
        assert fit is not None
        return fit
