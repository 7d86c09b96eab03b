"""The mode split: separated modes sampled one by one, weighted by their masses.

When the pilot's search (:class:`~pemc_stan.core.search.ModeSearch`) has found
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
modes together lifts (docs/decisions.md).

:func:`split_modes` runs the chains the user asked for from where CmdStan would start
them (scouts: a mode the search missed can catch one, whose draws then disagree with
their group's) and, when the search found several modes, :data:`CHAINS_PER_MODE` more
from each mode centre, all of the user's unchanged program with the user's ``iter_warmup`` and
``iter_sampling``.  Modes between which chains move are
merged into one group (:func:`~pemc_stan.modes.grouping.cell_groups`: they are
connected for NUTS and sampled
together), and the split is accepted only when the evidence says the decomposition
holds:

- the search stopped because it saw no sign of modes it missed
  (:data:`~pemc_stan.core.search.UNSEEN_SHARE_MAX`);
- the fit's own verdict (:meth:`~pemc_stan.modes.split_fit.ModeSplitFit.check`) is ok,
  or short only of draws for an sd (:data:`IMPRECISE_REASONS`, which runs longer):
  divergences, R-hat and ESS within each group's chains, the chains of a group
  agreeing, no mode the search found left unvisited or outside every group, every
  group's mass estimated (bridge sampling restricted to the group's cells, so no mass is
  counted twice), and within a group of connected modes no mode visited far less than
  the search weighed it (a spike in a slab).

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
from collections.abc import Callable, Mapping
from typing import Any

import cmdstanpy
import numpy as np
from numpy.typing import NDArray

from pemc_stan.backend.console import failure_reason
from pemc_stan.backend.progress import stage
from pemc_stan.core.coordinates import coordinate_draws
from pemc_stan.core.search import NEW_MODE_SHARE, UNSEEN_SHARE_MAX, ModeSearch
from pemc_stan.errors import PemcStanError
from pemc_stan.estimators.mixture import mixture_log_z
from pemc_stan.modes.bridge import bridge_from_draws
from pemc_stan.modes.density import DensityEvaluator
from pemc_stan.modes.grouping import cell_groups, draw_cells, group_stats, worst_rhat
from pemc_stan.modes.scouts import SplitDraws
from pemc_stan.modes.search_mass import search_mass
from pemc_stan.modes.split_fit import CHAINS_PER_MODE, ModeSplitFit, draw_log_weights
from pemc_stan.modes.wide import (
    WIDE_SEED_OFFSET,
    ModeGaussians,
    WideDrawsFailed,
    mode_gaussians,
    unexplained_starts,
    wide_sample,
)
from pemc_stan.numeric import logsumexp
from pemc_stan.output.diagnostics import RHAT_MAX, Note, Verdict, leapfrog_gradients
from pemc_stan.sampling.follow_up import (
    ADAPT_DELTA_STEPS,
    Budget,
    FollowUpStep,
    longer_can_fix,
)
from pemc_stan.sampling.model import MethodModel

logger = logging.getLogger(__name__)

__all__ = ["MAX_SPLIT_MODES", "SplitOutcome", "run_inits", "scout_inits", "split_modes"]
#: Offset of the scouts' seed from the run's.
SCOUT_SEED_OFFSET = 15485863
#: The split is tried for at most this many modes (beyond, the modes are rarely all
#: separated, and the chains would cost more than tempering).
MAX_SPLIT_MODES = 24
#: A split refused for mass no group holds searches again from that mass at most this
#: many times (each within the budget; once is not always enough: docs/decisions.md).
MAX_EXTENSIONS = 2
#: A split refused only for these reasons (slow mixing within a group of modes) runs once
#: more, twice as long, from where its chains ended (:func:`_remedied`), when the
#: follow-up budget allows.
SPLIT_LONGER_REASONS = ("rhat", "ess", "chains_agree", "sd_precision")
#: Reasons that do not refuse a split: its modes are sampled apart rightly, with too
#: few draws for an sd, or for the bridge's log Z of a single group (whose draws need no
#: mass).  The split is accepted, runs longer for an sd like a refused one while the
#: budget allows, and its verdict names what is still short.
IMPRECISE_REASONS = frozenset({"sd_precision", "log_z_bridge"})
#: Predicted cost of the split run again one step further along ``ADAPT_DELTA_STEPS``, in
#: multiples of the run before it (``k`` steps: this to the power ``k``): a smaller step
#: size lengthens each iteration by about this much a step.  It is a measured cost, so
#: the budget takes it without a further margin (docs/decisions.md).
ADAPT_DELTA_COST = 1.6


class SplitOutcome:
    """What :func:`split_modes` decided: the fit, or why the method must temper.

    Attributes
    ----------
    fit
        The accepted :class:`ModeSplitFit`, or None.
    why
        Why the split was not used: refused after its run, or not started (too many
        modes, a search that may have missed modes, initial values given); what it is
        short of when it was used short of precision; empty when it was used as it is,
        or when there was no search to split by.
    tried
        Whether the split's chains ran (else ``why`` says why they were not started).
    names
        The names of the verdict's reasons when the split was refused for them, or
        accepted short of them (:data:`IMPRECISE_REASONS` only).
    unexplained
        Refused for mass no group holds (``mode_wide_mass``): starts where that mass is,
        in base coordinates (:func:`~pemc_stan.modes.wide.unexplained_starts`); else None.
    modes
        With ``unexplained``: the Gaussians of the modes' draws
        (:func:`~pemc_stan.modes.wide.mode_gaussians`).
    rhat
        Refused for R-hat within a group: the largest (else NaN).
    draws
        The last refused run's chains (:class:`~pemc_stan.modes.scouts.SplitDraws`),
        which judge the tempered run that follows; None when none ran or was read.
    gradients
        Gradient evaluations of every run of a refused split (0: none ran or was read):
        the follow-ups' budget counts them (:func:`~pemc_stan.sampling.follow_up.follow_up`).
    ran
        The chains the split's last run had, and why so many (empty: none ran): the
        ones asked for, and :data:`CHAINS_PER_MODE` at each mode when the search found
        several.
    """

    def __init__(self, fit: ModeSplitFit | None = None, why: str = "", tried: bool = False,
                 names: tuple[str, ...] = ()):
        self.fit, self.why, self.tried, self.names = fit, why, tried, names
        self.unexplained: NDArray[np.float64] | None = None
        self.modes: ModeGaussians = []
        self.rhat = float("nan")
        self.draws: SplitDraws | None = None
        self.gradients = 0
        self.ran = ""

    def note(self) -> Note | None:
        """What the method's fit tells of a split that was refused (None: accepted, or
        nothing to tell)."""
        if self.fit is not None or not self.why:
            return None
        if not self.tried:
            return Note("mode_split", f"the modes were not split: {self.why}", "nothing to do")
        ran = f" (its {self.ran})" if self.ran else ""
        return Note("mode_split", f"the modes were not split{ran}, so the run tempered: "
                    f"{self.why}",
                    "nothing is needed: the tempered run is judged on its own; to spare "
                    "the split's attempt on this model next time, pass split_modes='never'")


def _chains_run(asked: int, modes: int) -> str:
    """The split's chains in words: the ``asked`` ones from Stan's usual initial values and,
    with several ``modes``, :data:`CHAINS_PER_MODE` at each (and how many in all)."""
    if modes < 2:
        return f"{asked} NUTS chains from Stan's usual initial values"
    return (f"{asked + CHAINS_PER_MODE * modes} NUTS chains: {asked} from Stan's usual "
            f"initial values and {CHAINS_PER_MODE} at each of {modes} modes of the search")


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
                budget: Budget, extend: int = MAX_EXTENSIONS,
                **cmdstanpy_kwargs: Any) -> SplitOutcome:
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
    budget
        The run's budget: the split runs longer, or searches again, only within it.
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
    run = _run(model, f"mode split: {_chains_run(chains, len(centres))}",
               inits, chains if inits is None else len(inits), iter_warmup, iter_sampling,
               seed, output_dir, show_progress, kwargs)
    if isinstance(run, SplitOutcome):
        return run
    outcome = _judge(model, coords, search, run, seed)
    spent = float(MAX_EXTENSIONS - extend)  # earlier splits' runs, in first runs
    if outcome.unexplained is not None and outcome.unexplained.size and extend > 0 \
            and budget.allows(1.0, spent=spent):
        return _split_extended(model, search, run, outcome, chains=chains,
                               iter_warmup=iter_warmup, iter_sampling=iter_sampling, seed=seed,
                               output_dir=output_dir, show_progress=show_progress,
                               budget=budget, kwargs=cmdstanpy_kwargs, extend=extend - 1)
    return _remedied(model, coords, search, run, outcome, budget=budget, spent=spent,
                     iter_warmup=iter_warmup, iter_sampling=iter_sampling, seed=seed,
                     output_dir=output_dir, show_progress=show_progress, kwargs=kwargs)


def _next_step(outcome: SplitOutcome, budget: Budget, spent: float, unit: float,
               iter_warmup: int, iter_sampling: int, adapt_delta: float
               ) -> tuple[str, float, int, float] | None:
    """The remedy of a split refused only for what a new run of it can fix, within the
    budget: ``(change, adapt_delta, iter_sampling, predicted cost in first runs)``;
    ``unit`` is the refused run's predicted cost in first runs, ``spent`` what the runs
    after the first took.

    Divergences first (a higher ``adapt_delta``: the chains must reach all of each mode
    before their mixing is judged): the next step of ``ADAPT_DELTA_STEPS`` when the
    budget can pay for every step left, else the furthest step it can pay for, so that
    the one run it allows is the likeliest to pass.  Then slow mixing within a group
    (twice the draws, when by :func:`longer_can_fix` the budget's draws can fix the
    R-hat).  None when the refusal names anything else or the budget does not allow
    the step.
    """
    names = set(outcome.names)
    if not names or not names <= {"divergences", *SPLIT_LONGER_REASONS} \
            or (outcome.fit is not None and not names <= IMPRECISE_REASONS):
        return None
    if "divergences" in names:
        rungs = [d for d in ADAPT_DELTA_STEPS if d > adapt_delta + 1e-9]
        costs = [unit * ADAPT_DELTA_COST ** (k + 1) for k in range(len(rungs))]
        if rungs and budget.allows(sum(costs), spent, margin=1.0):
            k = 0
        else:
            fits = [k for k in range(len(rungs)) if budget.allows(costs[k], spent, margin=1.0)]
            if not fits:
                return None
            k = fits[-1]
        return (f"adapt_delta {adapt_delta:g} -> {rungs[k]:g} (mode split)", rungs[k],
                iter_sampling, costs[k])
    cost = unit * (iter_warmup + 2 * iter_sampling) / max(iter_warmup + iter_sampling, 1)
    if not longer_can_fix(outcome.rhat, budget.factor) or not budget.allows(cost, spent):
        return None
    return (f"iter_sampling {iter_sampling} -> {2 * iter_sampling} (mode split)", adapt_delta,
            2 * iter_sampling, cost)


def _remedied(model: MethodModel, coords: Any, search: ModeSearch,
              run: cmdstanpy.CmdStanMCMC, outcome: SplitOutcome, *, budget: Budget,
              spent: float, iter_warmup: int, iter_sampling: int, seed: int | None,
              output_dir: str | os.PathLike[str] | None, show_progress: bool,
              kwargs: dict[str, Any], steps: tuple[FollowUpStep, ...] = (),
              unit: float = 1.0) -> SplitOutcome:
    """The split run again, every chain from its last draw, while its refusal has a
    remedy the budget allows (:func:`_next_step`); the last run alone is judged, and the
    steps are recorded (:attr:`ModeSplitFit.split_steps`)."""
    adapt_delta = float(kwargs.get("adapt_delta") or ADAPT_DELTA_STEPS[0])
    step = _next_step(outcome, budget, spent, unit, iter_warmup, iter_sampling, adapt_delta)
    if step is None:
        return outcome
    change, delta, draws, cost = step
    k = len(steps) + 1
    logger.info("mode split: run again with %s after %s", change, outcome.why)
    again = _run(model, f"mode split: {change}, every chain from its last draw",
                 _last_draws(run, list(model.program.parameter_names)), run.chains,
                 iter_warmup, draws, None if seed is None else seed + k,
                 None if output_dir is None else os.path.join(output_dir, f"split_again_{k}"),
                 show_progress, {**kwargs, "adapt_delta": delta})
    if isinstance(again, SplitOutcome):
        return _refusal(f"{outcome.why}; {change}: {again.why}", again, outcome)
    judged = _judge(model, coords, search, again, None if seed is None else seed + k)
    short = judged.fit is None or bool(judged.names)  # refused, or still imprecise
    done = (*steps, FollowUpStep(change, outcome.why, _earlier_gradients(again),
                                 "suspect" if short else "ok"))
    if short:
        further = _remedied(model, coords, search, again, judged, budget=budget,
                            spent=spent + cost, iter_warmup=iter_warmup, iter_sampling=draws,
                            seed=seed, output_dir=output_dir, show_progress=show_progress,
                            kwargs={**kwargs, "adapt_delta": delta}, steps=done, unit=cost)
        if further is not judged or judged.fit is None:  # a further step ran, or none could
            if further.fit is None:
                return _refusal(f"{outcome.why}; after {change}: {further.why}", further,
                                outcome)
            further.fit.earlier_gradients += _earlier_gradients(run)
            return further
    assert judged.fit is not None  # accepted, short of precision or not
    judged.fit.split_steps = list(done)
    judged.fit.earlier_gradients = _earlier_gradients(run)
    return judged


def _refusal(why: str, last: SplitOutcome, earlier: SplitOutcome | None = None
             ) -> SplitOutcome:
    """A refusal that says ``why``, with the names and the chains of the ``last``
    outcome (its draws, else the ``earlier``'s)."""
    out = SplitOutcome(why=why, tried=True, names=last.names)
    out.draws = last.draws if last.draws is not None or earlier is None else earlier.draws
    out.gradients = last.gradients + (0 if earlier is None else earlier.gradients)
    out.ran = last.ran or ("" if earlier is None else earlier.ran)
    return out


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


def _last_draws(run: cmdstanpy.CmdStanMCMC, names: list[str]) -> list[Mapping[str, Any]]:
    """Each chain's last draw (constrained values), as initial values."""
    last = {k: v[:, -1] for k, v in
            _group_draws(run, names, np.ones(run.chains, dtype=bool)).items()}
    return [{k: v[c].tolist() for k, v in last.items()} for c in range(run.chains)]


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
    pilot = model.pilot()
    if pilot is None or refused.unexplained is None or not refused.modes:
        return None
    try:
        groups, centres = pilot.modes_from(refused.unexplained, seed, search.seconds_per_path)
    except Exception as exc:  # Pathfinder or the density failing there: keep the refusal
        logger.info("mode split: the search from the unexplained mass failed (%s)",
                    failure_reason(exc))
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
                    budget: Budget, kwargs: dict[str, Any], extend: int = 0) -> SplitOutcome:
    """A split refused for mass no group holds, tried once more with the modes a search
    from that mass finds (:func:`_extend_search`): the wide sampler saw them, so the
    run can sample them instead of tempering.  The new split alone is judged, and may
    extend ``extend`` more times; the step is recorded."""
    wider = _extend_search(model, search, refused, None if seed is None else seed + 2)
    if wider is None:
        return refused
    change = f"modes {len(search.centres)} -> {len(wider.centres)} (mode split)"
    logger.info("mode split: run again with %s after %s", change, refused.why)
    again = split_modes(model, wider, chains=chains, iter_warmup=iter_warmup,
                        iter_sampling=iter_sampling, seed=None if seed is None else seed + 2,
                        output_dir=None if output_dir is None
                        else os.path.join(output_dir, "split_extended"),
                        show_progress=show_progress, budget=budget, extend=extend, **kwargs)
    if again.fit is None:
        return _refusal(f"{refused.why}; {change}: {again.why}", again, refused)
    again.fit.split_steps.insert(0, FollowUpStep(change, refused.why,
                                                 again.fit.run_gradients(), "ok"))
    again.fit.earlier_gradients += _earlier_gradients(run)
    return again


def _judge(model: MethodModel, coords: Any, search: ModeSearch, run: cmdstanpy.CmdStanMCMC,
           seed: int | None) -> SplitOutcome:
    """Cells, masses and the verdict of a split's run (a refusal that says why)."""
    z: NDArray[np.float64] | None = None
    try:
        z = _base_coordinates(model, coords, run)
        outcome = _judge_run(model, coords, search, run, z, seed)
    except (ValueError, PemcStanError) as exc:  # draws the base coordinates cannot map
        outcome = SplitOutcome(why=f"the split's draws could not be judged ({exc})", tried=True)
        z = None  # no chains to judge the tempered run by
    modes = len(search.centres) if len(search.centres) > 1 else 0
    outcome.ran = _chains_run(run.chains - CHAINS_PER_MODE * modes, modes)
    if outcome.fit is None:
        outcome.gradients = _earlier_gradients(run)
    if outcome.fit is None and z is not None:
        names = list(model.program.parameter_names)
        outcome.draws = SplitDraws(
            z, np.asarray(search.base.mean, dtype=float),
            np.asarray(search.base.cov, dtype=float), _group_draws(
                run, names, np.ones(run.chains, dtype=bool)), model.program, model.data,
            coords)
    return outcome


def _judge_run(model: MethodModel, coords: Any, search: ModeSearch,
               run: cmdstanpy.CmdStanMCMC, z: NDArray[np.float64], seed: int | None
               ) -> SplitOutcome:
    """:func:`_judge` without the refusal for draws that cannot be mapped (``z``: the
    run's draws in base coordinates, (chains, draws, D)).  The wide
    importance sampler (:func:`~pemc_stan.modes.wide.wide_sample`) runs only for a split
    every other check
    passed: it can only refuse it, and its draws cost seconds that a split already
    refused does not need."""
    centres = np.asarray(search.centres, dtype=float)
    n_chains, n_draws, dim = z.shape
    classify: Callable[[NDArray[np.float64]], NDArray[np.intp]] = \
        lambda zz: search.base.nearest_centre(zz, centres)  # noqa: E731 (one place to swap)
    cells = classify(z.reshape(-1, dim)).reshape(n_chains, n_draws)
    groups, outside, members = cell_groups(cells, len(centres))
    program = model.program
    names = list(program.parameter_names)
    slow = _unmixed_group(run, names, groups, len(members))
    if slow is not None:  # a curved or heavy-tailed mode's draws past the midpoint
        try:
            by_draws, cells_d = draw_cells(z, cells, search.base.mean, search.base.cov)
        except ValueError:
            by_draws = None
        if by_draws is not None:
            groups_d, outside_d, members_d = cell_groups(cells_d, len(centres))
            if _unmixed_group(run, names, groups_d, len(members_d)) is None:
                logger.info("mode split: cells drawn around the chains' draws (%s); %d "
                            "group(s) of modes", slow[0], len(members_d))
                cells, groups, outside, members = cells_d, groups_d, outside_d, members_d
                classify, slow = by_draws.labels, None
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
                return np.isin(classify(zg), cells_g)

            try:
                masses.append(bridge_from_draws(
                    program, model.data, _group_draws(run, names, groups == g),
                    name=program.name, seed=None if seed is None else seed + 7919 * g,
                    evaluator=evaluator, region=region))
            except (ValueError, RuntimeError, PemcStanError) as exc:
                return SplitOutcome(why=f"bridge sampling of the mass of mode group {g + 1} "
                                        f"failed ({exc})", tried=True)
    total = mixture_log_z([e.log_z for e in masses], [e.std_error for e in masses])
    per_draw = np.exp(draw_log_weights([e.log_z for e in masses], groups, n_draws))
    seen, unweighed = None, ""
    with stage("mode split: the search's Gaussians weigh the mass the chains found"):
        try:
            seen = search_mass(coords, search, evaluator, model.data, total[0], total[1],
                               seed, chains=z, weights=per_draw)
        except WideDrawsFailed as exc:
            unweighed = str(exc)
    fit = ModeSplitFit(run, model.result, groups=groups, mode_log_z=masses, search=search,
                       cells=cells, members=members, outside=outside, data=model.data,
                       original_model=model.original_model, seed=seed, search_mass=seen,
                       search_failure=unweighed)
    verdict = fit.check()
    wide, modes = None, mode_gaussians(z, cells, groups, members, masses)
    if _accepts(verdict) and len(centres) > 1:  # the wide sampler can only refuse it: last
        with stage(f"mode split: importance draws around the {len(centres)} modes"):
            try:
                wide = wide_sample(coords, search.base, evaluator, model.data, seed, masses,
                                   modes)
            except WideDrawsFailed as exc:
                fit.wide_failure = str(exc)
        fit.wide_log_weights = None if wide is None else wide[0]
        verdict = fit.check()
    if not _accepts(verdict):
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
    return SplitOutcome(fit, why="; ".join(str(r) for r in verdict.reasons), tried=True,
                        names=tuple(verdict.names()))


def _accepts(verdict: Verdict) -> bool:
    """Whether a split with this verdict is used: ok, or short only of precision
    (:data:`IMPRECISE_REASONS`)."""
    return set(verdict.names()) <= IMPRECISE_REASONS


def _unmixed_group(run: cmdstanpy.CmdStanMCMC, names: list[str], groups: NDArray[np.intp],
                   n_groups: int) -> tuple[str, float] | None:
    """The verdict's R-hat check (:meth:`ModeSplitFit.convergence`: the largest of the
    groups' R-hat of each parameter) before the masses are estimated: a split it refuses
    is refused without bridge sampling, which would cost seconds for nothing.  Why and
    the R-hat, or None
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
            worst = worst_rhat(group_stats(v[:, :, j], groups, n_groups))
            if worst > RHAT_MAX:
                return (f"rhat: R-hat of {name} (element {j + 1}) within a group of modes is "
                        f"{worst:.3g} (> {RHAT_MAX}): its chains disagree (their masses were "
                        "not estimated)", worst)
    return None
