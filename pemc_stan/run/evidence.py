"""Normalising-constant (evidence) estimates for Stan models and fits: ``pemc_stan.evidence()``.

:func:`evidence` is the front door for ``log Z`` as :func:`pemc_stan.run.pipeline.sample` is
for draws: it compiles and runs what an estimator needs (NUTS, Pathfinder, a method's
fit, the density program) and returns an
:class:`~pemc_stan.estimators.log_z.EvidenceEstimate` of
``log Z = log integral gamma(x) dx``, where ``gamma`` is the model's density
with **all constants** (every ``~`` as its full ``_lpdf``/``_lpmf``), so for a
proper prior ``Z`` is the marginal likelihood ``p(y)``.  The estimators
themselves are pure functions of draws and log densities in
:mod:`pemc_stan.estimators`.

Estimators
----------
``"bridge"``
    Meng & Wong's optimal bridge (:func:`~pemc_stan.estimators.log_z.bridge_sampling`)
    between the posterior draws and a multivariate normal fitted to half of
    them on Stan's unconstrained scale (:mod:`pemc_stan.stan.constraints`), with
    Fruehwirth-Schnatter's relative-MSE error.  Draws come from plain NUTS (a
    model, or a ``CmdStanMCMC`` fit of the unchanged program), from a
    :class:`~pemc_stan.methods.pseudo_extended.fit.PseudoExtendedFit` (its resampled
    draws) or from a continuously tempered fit (its resampled draws).
``"is"``
    Pareto-smoothed importance sampling with i.i.d. draws from the Gaussian
    approximation of a single-path Pathfinder run (``proposal="pathfinder"``);
    CmdStan writes ``lp__`` with every constant and Jacobian and the
    normalised ``lp_approx__`` (see :mod:`pemc_stan.run.pipeline`), so
    ``log w = lp__ - lp_approx__``.
``"ct"`` / ``"ti"``
    From a continuously tempered fit: the Rao-Blackwellised ratio of eq. 20
    (Graham & Storkey) or thermodynamic integration over ``beta`` from the
    same draws.  Given a model, a CT fit is run first.

The estimator is named by ``estimator=`` (``method=`` is its deprecated
spelling: in :func:`pemc_stan.sample` a method is a sampling method).

``gamma`` is evaluated at arbitrary points by a density program
(:mod:`pemc_stan.modes.density`).

:func:`compare_methods` compares estimates of the same model (by several
estimators) and warns when two disagree by more than their standard errors
allow; :func:`bayes_factor` combines two estimates.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pemc_stan.backend.processes import ending_children
from pemc_stan.errors import EvidenceDisagreementWarning, OptionsError, emit_warning
from pemc_stan.estimators.log_z import Comparison, EvidenceEstimate, compare
from pemc_stan.run.evidence_options import EvidenceOptions, canonical_estimator
from pemc_stan.run.evidence_sources import estimate_from
from pemc_stan.sampling.fit import ExtendedFit
from pemc_stan.stan.inputs import StanProgram, read_program

__all__ = ["compare_methods", "evidence", "parameter_names"]

def _estimator_argument(estimator: str | None, method: str | None) -> str:
    """The estimator :func:`evidence` was asked for: ``estimator=``, or the deprecated
    ``method=`` (with a :class:`DeprecationWarning`), else ``"bridge"``.

    Raises
    ------
    OptionsError
        If both are given.
    """
    if method is None:
        return "bridge" if estimator is None else estimator
    if estimator is not None:
        raise OptionsError(
            "method", method, "estimator= alone (method= is its deprecated spelling)",
            message=f"estimator={estimator!r} and method={method!r} both name the estimator; "
                    "method= is deprecated: pass estimator= alone")
    warnings.warn("method= is deprecated; use estimator=", DeprecationWarning, stacklevel=3)
    return method


# --------------------------------------------------------------------------- public API


def evidence(
    model_or_fit: Any,
    data: Mapping[str, Any] | str | os.PathLike[str] | None = None,
    estimator: str | None = None,
    *,
    method: str | None = None,
    program: str | os.PathLike[str] | None = None,
    chains: int = 4,
    iter_warmup: int = 1000,
    iter_sampling: int = 1000,
    seed: int | None = None,
    output_dir: str | os.PathLike[str] | None = None,
    show_progress: bool = False,
    n_proposal: int | None = None,
    is_draws: int = 4000,
    is_proposal: str = "pathfinder",
    ti_grid: int = 101,
    warp: bool = False,
    **sampler_kwargs: Any,
) -> EvidenceEstimate:
    """Estimate ``log Z`` (log marginal likelihood, all constants kept) of a Stan model.

    Parameters
    ----------
    model_or_fit
        A ``.stan`` path, Stan program text or ``cmdstanpy.CmdStanModel``
        (the draws the estimator needs are produced here); a
        ``cmdstanpy.CmdStanMCMC`` fit of the unchanged program (give
        ``program`` unless the fit was compiled by pemc-stan, whose cache
        keeps the program next to the executable, and ``data``); a
        :class:`~pemc_stan.methods.pseudo_extended.fit.PseudoExtendedFit`; or a
        continuously tempered fit.
    data : mapping or path, optional
        The model's data (taken from the fit when it has it).
    estimator : {"bridge", "is", "ct", "ti"}, optional
        See the module docstring (aliases such as ``"psis"`` and a method's name, for
        its first estimator, are accepted).  Default: for a method's fit, the fit's own
        ``log Z`` (``fit.log_z()``: the mode split's, the cells' or the method's; the
        estimate's ``method`` names it), bridge sampling on its draws where it has
        none; ``"bridge"`` otherwise.
        Fits support: CmdStanMCMC ``"bridge"`` and ``"is"``;
        PseudoExtendedFit ``"bridge"``; continuously tempered fits
        ``"ct"``, ``"ti"`` and ``"bridge"``.
    method : str, optional
        Deprecated spelling of ``estimator`` (a :class:`DeprecationWarning`
        is issued); not to be given with it.
    program : path or str, optional
        The program of a ``CmdStanMCMC`` fit.
    chains, iter_warmup, iter_sampling, seed, output_dir, show_progress
        As in cmdstanpy, for the runs made here.  Without ``seed`` one is drawn
        (:func:`pemc_stan.run.pipeline.draw_seed`); the estimate's
        ``diagnostics["seed"]`` records the seed used.
    n_proposal : int, optional
        Bridge proposal draws.
    is_draws : int
        Proposal draws for ``"is"``.
    is_proposal : {"pathfinder", "student_t"}
        ``"is"`` proposal: the Gaussian of a single Pathfinder path, or a
        Student-t (5 degrees of freedom) fitted to NUTS draws (also the
        proposal used for ``"is"`` on a ``CmdStanMCMC`` fit).
    ti_grid : int
        Grid size for ``"ti"``.
    warp : bool
        Use the Warp-3 bridge (symmetrised, standardised target; robust to
        skewness, about twice the density evaluations).
    **sampler_kwargs
        Passed to cmdstanpy's ``sample`` (NUTS for ``"bridge"``) or to
        ``pemc_stan.sample(method="ct")``.

    Returns
    -------
    EvidenceEstimate

    Raises
    ------
    OptionsError
        On invalid options (naming the argument), ``estimator`` and ``method``
        both given, an estimator the input does not support, a ``CmdStanMCMC``
        fit whose program cannot be found, a method's fit that knows no method,
        or a program without parameters (all ``ValueError``).
    TypeError
        On an input of unknown type.
    FileNotFoundError
        If ``model_or_fit`` names a ``.stan`` file that does not exist.
    ImproperPriorError
        If a parameter has a flat, improper prior (before anything is compiled).
    DataError
        If the data do not match the program's data block.
    UnsupportedConstructError
        If the program cannot be rewritten or has unsupported parameter types.
    RuntimeError
        If a CmdStan run fails.
    """
    asked = estimator is not None or method is not None
    estimator = _estimator_argument(estimator, method)
    if seed is None and not asked and isinstance(model_or_fit, ExtendedFit):
        seed = model_or_fit.seed  # a fit's own estimate: its seed repeats it
    if seed is None:  # every estimate can be repeated: the seed drawn is recorded
        from pemc_stan.run.pipeline import draw_seed

        seed = draw_seed()
    opts = EvidenceOptions(estimator=estimator, chains=chains, iter_warmup=iter_warmup,
                           iter_sampling=iter_sampling, seed=seed, n_proposal=n_proposal,
                           is_draws=is_draws, is_proposal=is_proposal, ti_grid=ti_grid,
                           warp=warp)
    opts.validate()
    m = canonical_estimator(estimator)
    assert m is not None  # validated above
    out_dir = None if output_dir is None else Path(output_dir)
    with ending_children():  # CmdStan's children ended on error; cmdstanpy's INFO at DEBUG
        est = estimate_from(model_or_fit, data, m, opts, out_dir, program, show_progress,
                            sampler_kwargs, fit_default=not asked)
    return _seeded(est, seed)


def _seeded(est: EvidenceEstimate, seed: int) -> EvidenceEstimate:
    """``est`` with the seed of the call that made it in its diagnostics."""
    return EvidenceEstimate(est.log_z, est.std_error, est.method,
                            {**est.diagnostics, "seed": int(seed)})


def parameter_names(program: str | StanProgram) -> list[str]:
    """Names of the declared parameters of a program, in order.

    Raises
    ------
    StanProgramError
        If the program does not parse.
    """
    return read_program(program).parameter_names


def compare_methods(estimates: Sequence[EvidenceEstimate] | Mapping[str, EvidenceEstimate],
                    z_threshold: float = 3.0, warn: bool = True
                    ) -> dict[tuple[str, str], Comparison]:
    """Pairwise agreement of independent estimates of the same ``log Z``.

    Parameters
    ----------
    estimates : sequence or mapping of EvidenceEstimate
        Estimates (keys, or their ``method``, label them).
    z_threshold : float
        Pairs with ``|difference| > z_threshold * sqrt(SE_a^2 + SE_b^2)`` disagree.
    warn : bool
        Emit an :class:`EvidenceDisagreementWarning` per disagreeing pair.

    Returns
    -------
    dict
        ``(label_a, label_b) -> Comparison``.

    Raises
    ------
    OptionsError
        If fewer than two estimates are given (a ``ValueError``).
    ValueError
        As :func:`~pemc_stan.estimators.log_z.compare`.
    """
    items = list(estimates.items()) if isinstance(estimates, Mapping) else [
        (e.method if [x.method for x in estimates].count(e.method) == 1 else f"{e.method}#{i}",
         e) for i, e in enumerate(estimates)]
    if len(items) < 2:
        raise OptionsError("estimates", len(items), "at least two estimates",
                           message="compare_methods needs at least two estimates, got "
                                   f"{len(items)}")
    out: dict[tuple[str, str], Comparison] = {}
    for i in range(len(items)):
        for j in range(i + 1, len(items)):
            (la, a), (lb, b) = items[i], items[j]
            c = compare(a, b, z_threshold)
            out[(la, lb)] = c
            if c.disagree and warn:
                msg = (f"evidence estimates disagree: {la} log Z = {a.log_z:.4f} +/- "
                       f"{a.std_error:.3g} vs {lb} log Z = {b.log_z:.4f} +/- {b.std_error:.3g} "
                       f"(z = {c.z_score:.1f}); at least one is wrong or its error is "
                       "underestimated -- check the diagnostics (Pareto k, ESS, bridge "
                       "convergence) and run longer")
                emit_warning(msg, EvidenceDisagreementWarning)
    return out
