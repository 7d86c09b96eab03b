"""Where :func:`pemc_stan.run.evidence.evidence`'s estimates come from, one kind of input at a time.

A model (a ``.stan`` path, Stan program text or ``CmdStanModel``): the method whose
estimators need its fit is run, or multi-path Pathfinder (the modes check, the ``"is"``
proposal) and plain NUTS for ``"bridge"`` and ``"is"``.  A ``CmdStanMCMC`` fit of the
unchanged program: its draws, with the program and data it was run on.  A method's fit:
its own estimate, or bridge sampling on its resampled draws.  Every input's prior is
checked first (:func:`check_prior`), and every estimate is judged
(``diagnostics["verdict"]``).  The importance-sampling estimates
(:func:`importance_from_draws`, :func:`importance_from_pathfinder`) are exported by
:mod:`pemc_stan.run.evidence` as well.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cmdstanpy
import numpy as np
from numpy.typing import NDArray
from scipy.stats import multivariate_t

from pemc_stan.backend.compile import compile_model
from pemc_stan.errors import (
    FitSuspectWarning,
    OptionsError,
    PriorNormalisationWarning,
    emit_warning,
)
from pemc_stan.estimators.log_z import EvidenceEstimate, importance_sampling
from pemc_stan.estimators.normalisation import PriorReport, improper_prior, prior_report
from pemc_stan.methods import registry
from pemc_stan.modes.bridge import (
    bridge_from_draws,
    log_target_fn,
    posterior_setup,
    resampled_bridge,
)
from pemc_stan.modes.density import DensityEvaluator
from pemc_stan.sampling.fit import ExtendedFit
from pemc_stan.stan.inputs import StanProgram, _is_path, load_data, read_data, read_program

if TYPE_CHECKING:
    from pemc_stan.run.evidence_options import EvidenceOptions

logger = logging.getLogger(__name__)

__all__ = ["check_prior", "estimate_from", "importance_from_draws", "importance_from_pathfinder",
           "nuts_reasons", "pathfinder_modes"]


# --------------------------------------------------------------------------- inputs


def _chain_arrays_from_mcmc(fit: cmdstanpy.CmdStanMCMC, names: Sequence[str]
                            ) -> dict[str, NDArray[np.float64]]:
    """Parameter draws shaped ``(chains, draws, *shape)``."""
    chains = fit.chains
    out = {}
    for nm in names:
        v = np.asarray(fit.stan_variable(nm), dtype=float)
        out[nm] = v.reshape((chains, v.shape[0] // chains, *v.shape[1:]))
    return out


# --------------------------------------------------------------------------- importance sampling


def importance_from_draws(program: str | StanProgram, data: Mapping[str, Any] | None,
                          draws: Mapping[str, NDArray[np.float64]], *, name: str = "model",
                          n_draws: int = 4000, df: float = 5.0, seed: int | None = None,
                          output_dir: str | os.PathLike[str] | None = None,
                          evaluator: DensityEvaluator | None = None) -> EvidenceEstimate:
    """PSIS with a multivariate Student-t proposal fitted to posterior draws.

    The proposal ``g`` is a ``t_df`` with the mean and covariance of the
    posterior draws on the unconstrained scale (its heavier tails keep the
    weights' variance finite where a Gaussian fit would be too narrow);
    ``n_draws`` i.i.d. draws from ``g`` are weighted by
    ``gamma(c(u)) |J(u)| / g(u)`` and Pareto-smoothed.  Given the fitted
    proposal the estimate uses only the fresh i.i.d. draws, so its SE is the
    i.i.d. formula of :func:`~pemc_stan.estimators.log_z.importance_sampling`.

    Parameters
    ----------
    program : str or StanProgram
        Stan program text, or the program read once.
    data : mapping or None
        Its data.
    draws : mapping
        Posterior draws per parameter, ``(chains, draws, *shape)``.
    name : str
        Model name.
    n_draws : int
        Number of proposal draws.
    df : float
        Degrees of freedom of the t proposal (> 2).
    seed : int, optional
        Seed of the proposal draws.
    output_dir : path, optional
        Where the density evaluations' CSV files go.
    evaluator : DensityEvaluator, optional
        Reuse an existing evaluator.

    Returns
    -------
    EvidenceEstimate
        ``method="psis_student_t"``.

    Raises
    ------
    OptionsError
        If ``df <= 2`` (a ``ValueError``).
    ValueError
        If the draws are malformed or their covariance is singular.
    UnsupportedConstructError
        If a parameter type or bound is not supported.
    """
    if not df > 2:
        expected = "degrees of freedom > 2 (finite covariance)"
        raise OptionsError("df", df, expected, message=f"df={df!r}; expected {expected}")
    data = dict(data or {})
    program = read_program(program, name)
    space, _, u_post = posterior_setup(program, data, draws, name)
    ev = evaluator or DensityEvaluator(program, data, name, output_dir)
    flat_u = u_post.reshape(-1, u_post.shape[-1])
    mean = flat_u.mean(axis=0)
    cov = np.atleast_2d(np.cov(flat_u, rowvar=False))
    # a t with this shape matrix has covariance cov
    shape = cov * (df - 2.0) / df
    try:
        proposal = multivariate_t(loc=mean, shape=shape, df=df)
        u = np.atleast_2d(proposal.rvs(size=int(n_draws), random_state=np.random.default_rng(
            seed))).reshape(int(n_draws), -1)
    except (ValueError, np.linalg.LinAlgError) as err:
        raise ValueError(f"cannot fit a t proposal to the posterior draws ({err})") from err
    log_g = np.atleast_1d(proposal.logpdf(u))
    log_q = log_target_fn(space, ev)(u)
    est = importance_sampling(log_q, log_g, pareto_smooth=True)
    diag = dict(est.diagnostics)
    diag.update(df=float(df), dim=space.dim, n_invalid_proposals=int(np.sum(~np.isfinite(log_q))))
    return EvidenceEstimate(est.log_z, est.std_error, "psis_student_t", diag)


def importance_from_pathfinder(model: cmdstanpy.CmdStanModel, data: Mapping[str, Any] | None,
                               *, draws: int = 4000, seed: int | None = None,
                               output_dir: str | os.PathLike[str] | None = None
                               ) -> EvidenceEstimate:
    """PSIS estimate of ``log Z`` with i.i.d. draws from a single Pathfinder path.

    Parameters
    ----------
    model : cmdstanpy.CmdStanModel
        The compiled (unchanged) model.
    data : mapping or None
        Its data.
    draws : int
        Number of draws from the Gaussian approximation.
    seed : int, optional
        Pathfinder seed.
    output_dir : path, optional
        cmdstanpy output directory.

    Returns
    -------
    EvidenceEstimate
        ``method="psis_pathfinder"``; diagnostics include ``pareto_k``.

    Raises
    ------
    RuntimeError
        If Pathfinder fails.
    """
    pf = model.pathfinder(data=dict(data or {}) or None, num_paths=1, draws=int(draws),
                          psis_resample=False, calculate_lp=True, seed=seed,
                          output_dir=None if output_dir is None else str(output_dir),
                          show_console=False, sig_figs=18)
    names = list(pf.column_names)
    arr = np.asarray(pf.draws(), dtype=float)
    lp = arr[:, names.index("lp__")]
    lq = arr[:, names.index("lp_approx__")]
    est = importance_sampling(lp, lq, pareto_smooth=True)
    return EvidenceEstimate(est.log_z, est.std_error, "psis_pathfinder", dict(est.diagnostics))


# --------------------------------------------------------------------------- each input


def estimate_from(model_or_fit: Any, data: Mapping[str, Any] | str | os.PathLike[str] | None,
              m: str, opts: EvidenceOptions, out_dir: Path | None,
              program: str | os.PathLike[str] | None, show_progress: bool,
              sampler_kwargs: dict[str, Any], fit_default: bool = False) -> EvidenceEstimate:
    """:func:`evidence` after its options are checked: the estimate for each kind of input.
    With ``fit_default`` (no estimator asked for), a method's fit gives its own ``log Z``
    (``fit.log_z()``: one default per fit, wherever it is read) where it has one.

    Raises
    ------
    The errors listed by :func:`evidence`.
    """
    if isinstance(model_or_fit, ExtendedFit):
        d = load_data(data) if data is not None else dict(model_or_fit.data)
        prog = model_or_fit.program  # the user's own, when it was rewritten (a sum)
        gaps = check_prior(prog.original or prog, d)
        own = model_or_fit.log_z() if fit_default else None
        if own is not None:
            source = model_or_fit.result.method
            return _with_gaps(_judged(_tag(own, source.name if source else "fit"),
                                      [str(r) for r in model_or_fit.check().reasons]), gaps)
        return _with_gaps(_from_extended_fit(model_or_fit, m, opts, out_dir, d), gaps)
    if isinstance(model_or_fit, cmdstanpy.CmdStanMCMC):
        prog, d = _mcmc_inputs(model_or_fit, opts.estimator, m, program, data)
        gaps = check_prior(prog, d)
        draws = _chain_arrays_from_mcmc(model_or_fit, prog.parameter_names)
        return _with_gaps(_judged(_from_nuts_draws(prog, d, draws, m, opts, out_dir),
                                  nuts_reasons(model_or_fit)), gaps)
    prog = _model_program(model_or_fit)
    d = read_data(prog, data)
    gaps = check_prior(prog, d)  # before anything is compiled
    owner = registry.for_estimator(m)
    if owner is not None:  # the estimator needs that method's fit: run it
        method_fit = _run_method(owner, model_or_fit, prog, d, opts, out_dir, show_progress,
                                 sampler_kwargs)
        est = _from_extended_fit(method_fit, m, opts, out_dir, d)
        if "split_modes" not in sampler_kwargs:
            est = _noted(est, "skipped", SPLIT_SKIPPED.format(estimator=m, method=owner.name))
        return _with_gaps(est, gaps)
    est, reasons = _from_model(model_or_fit, prog, d, m, opts, out_dir, show_progress,
                               sampler_kwargs)
    return _with_gaps(_judged(est, reasons), gaps)


def _mcmc_inputs(fit: cmdstanpy.CmdStanMCMC, estimator: str, m: str, program: Any,
                 data: Mapping[str, Any] | str | os.PathLike[str] | None
                 ) -> tuple[StanProgram, dict[str, Any]]:
    """The program and data of a ``CmdStanMCMC`` fit, once the estimator ``m`` (asked for as
    ``estimator``) is known to work on its draws.

    Raises
    ------
    OptionsError
        If ``m`` needs more than NUTS draws, or the fit's program cannot be found.
    DataError
        If the data cannot be read.
    """
    if m not in ("bridge", "is"):
        raise OptionsError(
            "estimator", estimator, "'bridge' or 'is' for a CmdStanMCMC fit",
            message=f"estimator={estimator!r} is not available for a CmdStanMCMC fit; use "
                    "'bridge' or 'is', or pass the model to run what the estimator needs")
    prog = _mcmc_program(fit, program)
    d = load_data(data) if data is not None else _mcmc_data(fit)
    return prog, d


def _model_program(model: Any) -> StanProgram:
    """The program of a model given as a ``.stan`` path, Stan text, a ``CmdStanModel`` or a
    :class:`~pemc_stan.stan.inputs.StanProgram`.

    Raises
    ------
    TypeError
        On an input of another type.
    FileNotFoundError
        If ``model`` names a ``.stan`` file that does not exist.
    StanProgramError
        If the program cannot be read or parsed.
    """
    if not isinstance(model, (str, os.PathLike, cmdstanpy.CmdStanModel, StanProgram)):
        raise TypeError(f"expected a .stan path, Stan program text, CmdStanModel or a fit, got "
                        f"{type(model).__name__}")
    if isinstance(model, (str, os.PathLike)) and _is_path(model) and not Path(model).exists():
        raise FileNotFoundError(f"Stan file {model} does not exist")
    return read_program(model)


def _run_method(owner: registry.Method, model: Any, prog: StanProgram, data: dict[str, Any],
                opts: EvidenceOptions, out_dir: Path | None, show_progress: bool,
                sampler_kwargs: dict[str, Any]) -> ExtendedFit:
    """The fit of method ``owner`` (whose estimators need it) on the model.

    The estimator asked for needs the method's own draws, so the method runs without
    its mode split unless ``split_modes`` is given.

    Raises
    ------
    OptionsError, StanProgramError, DataError, RuntimeError
        As :func:`pemc_stan.run.pipeline.sample`.
    """
    from pemc_stan.run.pipeline import sample

    given = model if isinstance(model, cmdstanpy.CmdStanModel) else prog
    kwargs = {"split_modes": "never", **sampler_kwargs}
    return sample(given, data=data or None, method=owner, chains=opts.chains,
                  iter_warmup=opts.iter_warmup, iter_sampling=opts.iter_sampling,
                  seed=opts.seed, output_dir=None if out_dir is None else str(out_dir),
                  show_progress=show_progress, **kwargs)


def _from_model(model: Any, prog: StanProgram, data: dict[str, Any], m: str,
                opts: EvidenceOptions, out_dir: Path | None, show_progress: bool,
                sampler_kwargs: dict[str, Any]) -> tuple[EvidenceEstimate, list[str]]:
    """``log Z`` of an unchanged model by ``"bridge"`` or ``"is"``, running Pathfinder (the
    modes check, the ``"is"`` proposal) and NUTS; the estimate and why it is suspect.

    Raises
    ------
    OptionsError
        If the program has no parameters.
    StanCompileError, RuntimeError
        If the program does not compile or a CmdStan run fails.
    UnsupportedConstructError
        If a parameter type or bound is not supported.
    """
    cmd_model = (model if isinstance(model, cmdstanpy.CmdStanModel)
                 else compile_model(prog.text, name=prog.name))
    modes = pathfinder_modes(cmd_model, data, opts.seed)
    mode_reasons = [] if modes <= 1 else [
        f"modes: multi-path Pathfinder finds {modes} separate modes; the {m} estimate covers "
        "only the modes its draws visit (plain NUTS rarely moves between modes), so it can "
        "miss their mass; use estimator='ct'"]
    if m == "is" and opts.is_proposal == "pathfinder":
        return importance_from_pathfinder(cmd_model, data, draws=opts.is_draws, seed=opts.seed,
                                          output_dir=out_dir), mode_reasons
    names = prog.parameter_names
    if not names:
        raise OptionsError("model_or_fit", prog.name, "a program with parameters",
                           message="the program has no parameters: its log Z is its log "
                                   "density, no estimator is needed")
    kwargs = {"sig_figs": 18, **sampler_kwargs}  # no draw may round onto a bound
    fit = cmd_model.sample(data=data or None, chains=opts.chains, iter_warmup=opts.iter_warmup,
                           iter_sampling=opts.iter_sampling, seed=opts.seed,
                           output_dir=None if out_dir is None else str(out_dir / "nuts"),
                           show_progress=show_progress, **kwargs)
    draws = _chain_arrays_from_mcmc(fit, names)
    return (_from_nuts_draws(prog, data, draws, m, opts, out_dir),
            mode_reasons + nuts_reasons(fit))


def _from_nuts_draws(prog: StanProgram, data: dict[str, Any],
                     draws: dict[str, NDArray[np.float64]], m: str, opts: EvidenceOptions,
                     out_dir: Path | None) -> EvidenceEstimate:
    if m == "is":
        est = importance_from_draws(prog, data, draws, name=prog.name, n_draws=opts.is_draws,
                                    seed=opts.seed, output_dir=out_dir)
    else:
        est = bridge_from_draws(prog, data, draws, name=prog.name, seed=opts.seed,
                                n_proposal=opts.n_proposal, output_dir=out_dir, warp=opts.warp)
    return _tag(est, "nuts")


def _tag(est: EvidenceEstimate, source: str) -> EvidenceEstimate:
    diag = dict(est.diagnostics)
    diag["draws_from"] = source
    return EvidenceEstimate(est.log_z, est.std_error, est.method, diag)


def _mcmc_program(fit: cmdstanpy.CmdStanMCMC, program: Any) -> StanProgram:
    if program is not None:
        return read_program(program)
    exe = Path(fit.runset._args.model_exe or "")  # private: cmdstanpy keeps no model
    stan = exe.with_suffix(".stan")
    if stan.exists():
        return read_program(stan.read_text(), exe.stem)
    raise OptionsError("program", None, "the .stan path or text of the unchanged model",
                       message="cannot find the Stan program of this CmdStanMCMC fit; pass "
                               "program= (the .stan path or text of the unchanged model)")


def _mcmc_data(fit: cmdstanpy.CmdStanMCMC) -> dict[str, Any]:
    path = fit.runset._args.data  # private, as above
    if isinstance(path, (str, os.PathLike)) and Path(path).exists():
        return load_data(path)
    return {}


def _from_extended_fit(fit: ExtendedFit, m: str, opts: EvidenceOptions, out_dir: Path | None,
                       data: dict[str, Any]) -> EvidenceEstimate:
    """``log Z`` from a method's fit: the method's own estimators, or bridge sampling on its
    resampled draws.

    Raises
    ------
    OptionsError
        If the fit knows no method, or its method offers no estimator ``m`` (and ``m`` is
        not ``"bridge"``).
    """
    spec = fit.result.method
    if spec is None:  # a result made by calling a transformation directly, not the registry
        raise OptionsError("model_or_fit", type(fit).__name__, "a fit made by pemc_stan.sample",
                           message=f"this {type(fit).__name__} knows no method (its "
                                   "TransformResult was not made through the registry); "
                                   "pass a fit made by pemc_stan.sample")
    reasons = [str(r) for r in fit.check().reasons]
    own = fit.own_estimate(m, ti_grid=opts.ti_grid)
    if own is not None:
        return _judged(_tag(own, spec.name), reasons)
    if m != "bridge":
        offered = ", ".join(repr(e) for e in ("bridge", *spec.estimators))
        raise OptionsError("estimator", m, f"one of {offered} for a {type(fit).__name__}",
                           message=f"estimator={m!r} is not available for a "
                                   f"{type(fit).__name__}; use {offered}")
    est = resampled_bridge(fit, data, seed=opts.seed, n_proposal=opts.n_proposal,
                           output_dir=out_dir, warp=opts.warp)
    return _judged(_tag(est, spec.name), reasons)



def check_prior(program: StanProgram, data: Mapping[str, Any]) -> PriorReport:
    """Refuse an improper prior; warn about a prior of the wrong mass (see
    :mod:`pemc_stan.estimators.normalisation`).

    Raises
    ------
    ImproperPriorError
        Naming every parameter with a flat, improper prior.
    """
    report = prior_report(program, data)
    refused = improper_prior(program, data, report)
    if refused is not None:
        raise refused
    for gap in report.gaps:
        emit_warning(gap.message, PriorNormalisationWarning, stacklevel=3)
    return report


#: What ``evidence`` with a method's own estimator skips of what ``sample`` runs.
SPLIT_SKIPPED = ("the mode split: estimator={estimator!r} needs {method}'s own draws, so the "
                 "modes were tempered even if separated; pemc_stan.sample runs the split "
                 "first, and with split_modes='auto' here the estimate is the split's bridge "
                 "estimate when the split is accepted")


def _noted(est: EvidenceEstimate, key: str, note: str) -> EvidenceEstimate:
    """``est`` with ``note`` in its diagnostics under ``key``, and logged."""
    logger.info("log Z (%s): %s", est.method, note)
    return EvidenceEstimate(est.log_z, est.std_error, est.method,
                            {**est.diagnostics, key: note})


def _with_gaps(est: EvidenceEstimate, report: PriorReport) -> EvidenceEstimate:
    """``est`` with the prior's normalisation gap recorded in its diagnostics."""
    if not report.gaps:
        return est
    diag = dict(est.diagnostics)
    diag["prior_log_gap"] = report.log_gap
    diag["prior_gaps"] = [g.message for g in report.gaps]
    return EvidenceEstimate(est.log_z, est.std_error, est.method, diag)


def _judged(est: EvidenceEstimate, reasons: list[str]) -> EvidenceEstimate:
    """``est`` with ``diagnostics["verdict"]`` (``"ok"``/``"suspect"``) and its reasons; a
    suspect estimate is also warned about."""
    diag = dict(est.diagnostics)
    diag["verdict"] = "suspect" if reasons else "ok"
    diag["reasons"] = list(reasons)
    if reasons:
        message = (f"the log Z estimate ({est.method}) is suspect: " + "; ".join(reasons))
        emit_warning(message, FitSuspectWarning, stacklevel=3)
    return EvidenceEstimate(est.log_z, est.std_error, est.method, diag)


def nuts_reasons(fit: cmdstanpy.CmdStanMCMC) -> list[str]:
    """Why plain NUTS draws are suspect: R-hat, divergences.

    Raises
    ------
    Nothing.
    """
    from pemc_stan.output.diagnostics import DIVERGENT_SHARE_MAX, RHAT_MAX, rhat_and_ess

    reasons = []
    draws = np.asarray(fit.draws(concat_chains=False), dtype=float)  # (iter, chains, cols)
    worst = (0.0, "")
    for j, name in enumerate(fit.column_names):
        if name.endswith("__"):
            continue
        rhat, _ = rhat_and_ess(draws[:, :, j].T)
        if np.isfinite(rhat) and rhat > worst[0]:
            worst = (rhat, name)
    if worst[0] > RHAT_MAX:
        reasons.append(f"rhat: R-hat of {worst[1]} is {worst[0]:.3f} (> {RHAT_MAX}): the NUTS "
                       "chains disagree, perhaps in different modes; use estimator='ct'")
    try:
        divergent = int(np.sum(fit.method_variables()["divergent__"]))
    except (KeyError, AttributeError):
        divergent = 0
    share = divergent / max(draws.shape[0] * draws.shape[1], 1)
    if share > DIVERGENT_SHARE_MAX:
        reasons.append(f"divergences: {divergent} divergent transitions; increase adapt_delta")
    return reasons


def pathfinder_modes(model: cmdstanpy.CmdStanModel, data: Mapping[str, Any] | None,
                     seed: int | None) -> int:
    """How many distinct modes multi-path Pathfinder finds (0 when it fails).

    Raises
    ------
    Nothing.
    """
    from pemc_stan.backend.pathfinder import group_paths, log_importance_weights, run_paths

    try:
        pf = run_paths(model, data, num_paths=8, draws=1000, seed=seed)
        cols = list(pf.column_names)
        arr = np.asarray(pf.draws(), dtype=float)
        params = arr[:, [i for i, c in enumerate(cols) if not c.endswith("__")]]
        groups, _ = group_paths(params, log_importance_weights(arr, cols), 8, min_draws=2)
        return len(groups)
    except Exception as exc:  # any failure: this is only a check
        logger.debug("Pathfinder mode check failed: %s", exc)
        return 0
