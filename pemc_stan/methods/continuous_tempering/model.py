"""Running continuous tempering: the base density and log zeta, NUTS, the bootstrap.

The base density and ``log zeta`` are fitted on the original model (section 6
of Graham & Storkey: multi-path Pathfinder by default, paths grouped by mode
(:func:`pemc_stan.backend.pathfinder.group_paths`) and combined as the
moment-matched mixture of eq 25; ADVI or Laplace selectable), then the CT
program is run and, for ``bootstrap_rounds`` more rounds, the base is re-fitted
to the eq-21 weighted draws and ``log zeta`` set to the eq-20 estimate,
stopping early once ``log Z`` moves by less than ``bootstrap_tol`` combined
standard errors.
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Any

import cmdstanpy
import numpy as np

from pemc_stan.backend.pathfinder import group_paths, log_importance_weights
from pemc_stan.methods.base import MethodModel
from pemc_stan.methods.continuous_tempering.base_density import (
    BaseDensity,
    extract_variable,
    moment_match,
)
from pemc_stan.methods.continuous_tempering.fit import ContinuousTemperingFit
from pemc_stan.methods.continuous_tempering.options import ContinuousTemperingOptions
from pemc_stan.methods.continuous_tempering.transform import ContinuousTemperingResult

logger = logging.getLogger(__name__)

__all__ = ["ContinuousTemperingModel"]


class ContinuousTemperingModel(MethodModel):
    """A Stan model prepared for continuous tempering (Graham & Storkey 2017).

    Parameters
    ----------
    model
        Stan text, a ``.stan`` path or a ``cmdstanpy.CmdStanModel``.
    data
        The model's data (dict or JSON path).
    options
        :class:`~pemc_stan.methods.continuous_tempering.transform.ContinuousTemperingOptions`, or
        pass its fields as keyword arguments.

    Raises
    ------
    ValueError, StanProgramError
        As :func:`~pemc_stan.methods.continuous_tempering.transform.transform_continuous_tempering`
        (raised here, before anything is compiled), and when the base
        coordinates' sizes or bounds cannot be evaluated from the data.
    """

    result: ContinuousTemperingResult

    def __init__(self, model: Any, data: Any = None,
                 options: ContinuousTemperingOptions | None = None,
                 **option_kwargs: Any) -> None:
        super().__init__(model, data, options, **option_kwargs)
        if self.result.options.temper == "posterior":
            self.dim = self.result.coordinates.dim(self.data)  # sizes must come from data

    def ct_model(self) -> cmdstanpy.CmdStanModel:
        """The compiled CT program (cached by content hash)."""
        return self.method_model()

    def _param_draws(self, values: np.ndarray, columns: list[str]) -> dict[str, np.ndarray]:
        out = {}
        for b in self.result.coordinates.blocks:
            arr, el = b.shape(self.data or {})
            out[b.name] = extract_variable(values, columns, b.name, (*arr, *el))
        return out

    def fit_base(self, seed: int | None = None) -> tuple[BaseDensity | None, float]:
        """Initial base density and ``log zeta`` (section 6).

        ``base="pathfinder"``: multi-path Pathfinder (no PSIS resampling) on
        the original model; paths are grouped by mode, each mode's draws
        moment-matched and the modes combined as the mixture of eq 25 with
        weights from their importance-sampling masses; ``log zeta = log
        sum_modes Z_m``.  ``"advi"`` / ``"laplace"``: the base is
        moment-matched to the approximation's draws; as CmdStan's ``log_p__``
        of these methods drops the density's constants, ``log zeta`` comes
        from the Pathfinder importance-sampling estimate.  A fixed
        ``BaseDensity`` is used as is.  ``options.log_zeta`` overrides the
        estimate.

        Returns
        -------
        (BaseDensity or None, float)
            None under likelihood tempering (the base is the prior).

        Raises
        ------
        RuntimeError
            If the approximation fails (the message says what to pass instead).
        """
        opts: ContinuousTemperingOptions = self.result.options
        model = self.original_model()
        coords = self.result.coordinates
        need_pf = opts.log_zeta is None or (opts.temper == "posterior" and opts.base ==
                                            "pathfinder")
        base: BaseDensity | None = opts.base if isinstance(opts.base, BaseDensity) else None
        log_zeta = opts.log_zeta
        pf_groups = None
        if need_pf:
            try:
                pf = model.pathfinder(data=self.data or None, seed=seed, num_paths=opts.num_paths,
                                      draws=opts.base_draws, psis_resample=False,
                                      show_console=False)
            except Exception as exc:  # noqa: BLE001
                raise RuntimeError(
                    f"Pathfinder on {self.name} failed ({exc}); pass log_zeta= and a "
                    "BaseDensity as base=, or base='advi'/'laplace' with log_zeta=") from exc
            cols = list(pf.column_names)
            arr = np.asarray(pf.draws(), dtype=float)
            lw = log_importance_weights(arr, cols)
            if opts.temper == "posterior":
                z, _ = coords.forward(self._param_draws(arr, cols), self.data)
            else:  # group by the raw parameter columns
                pcols = [i for i, c in enumerate(cols) if not c.endswith("__")]
                z = arr[:, pcols]
            pf_groups, pf_log_zeta = group_paths(z, lw, opts.num_paths, min_draws=2)
            if log_zeta is None:
                log_zeta = pf_log_zeta
            if base is None and opts.temper == "posterior" and opts.base == "pathfinder":
                base = moment_match(z, None, pf_groups, opts.base_covariance)
                base.info.update({"method": "pathfinder", "modes": len(pf_groups)})
        if base is None and opts.temper == "posterior":
            fit: Any
            if opts.base == "advi":
                fit = model.variational(data=self.data or None, seed=seed, draws=opts.base_draws,
                                        algorithm="meanfield", show_console=False,
                                        require_converged=False)
                cols = list(fit.column_names)
                arr = np.asarray(fit.variational_sample, dtype=float)
            else:  # laplace
                # the mode is written with 12 significant digits: CmdStan re-reads it and
                # checks simplexes / correlation matrices to 1e-8
                mode = model.optimize(data=self.data or None, seed=seed, jacobian=True, sig_figs=12,
                                      show_console=False)
                fit = model.laplace_sample(data=self.data or None, mode=mode, seed=seed,
                                           draws=opts.base_draws, sig_figs=12)
                cols = list(fit.column_names)
                arr = np.asarray(fit.draws(), dtype=float)
            z, _ = coords.forward(self._param_draws(arr, cols), self.data)
            base = moment_match(z, None, None, opts.base_covariance)
            base.info.update({"method": opts.base})
        assert log_zeta is not None
        logger.info("initial log zeta = %.6g (base %s)", log_zeta,
                    "prior" if base is None else base.info.get("method", "given"))
        return base, float(log_zeta)

    def _run(self, base: BaseDensity | None, log_zeta: float, chains: int, iter_warmup: int,
             iter_sampling: int, seed: int | None, output_dir: str | os.PathLike[str] | None,
             show_progress: bool, history: list[dict[str, Any]], **kw: Any
             ) -> ContinuousTemperingFit:
        data = self.result.data(self.data, log_zeta=log_zeta, base=base)
        fit = self.run_nuts(data, chains, iter_warmup, iter_sampling, seed, output_dir,
                            show_progress, **kw)
        return ContinuousTemperingFit(fit, self.result, log_zeta, base=base, data=self.data,
                                      original_model=self.original_model, seed=seed,
                                      history=history)

    def sample(self, chains: int = 4, iter_warmup: int = 1000, iter_sampling: int = 1000,
               seed: int | None = None, output_dir: str | os.PathLike[str] | None = None,
               show_progress: bool = False, **cmdstanpy_kwargs: Any) -> ContinuousTemperingFit:
        """Fit the base and log zeta, run NUTS on the CT program, bootstrap (section 6).

        After each run the base is moment-matched to the eq-21 weighted draws
        in base coordinates (diagonal or dense, as configured) and ``log zeta``
        set to the eq-20 estimate, for up to ``options.bootstrap_rounds`` extra
        runs; the loop stops early when ``|log Z_r - log Z_{r-1}| <=
        bootstrap_tol * sqrt(se_r^2 + se_{r-1}^2)``.  A fixed ``BaseDensity``
        is not re-fitted (only ``log zeta`` is updated); a given ``log_zeta``
        with ``bootstrap_rounds=0`` is used as is.

        Parameters
        ----------
        chains, iter_warmup, iter_sampling, seed, output_dir, show_progress
            Passed to ``CmdStanModel.sample`` (every round; round ``r`` writes
            to ``output_dir/round_r`` when given).
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
        base, log_zeta = self.fit_base(seed)
        history: list[dict[str, Any]] = []
        fit: ContinuousTemperingFit | None = None
        for r in range(opts.bootstrap_rounds + 1):
            round_dir = None if output_dir is None else Path(output_dir) / f"round_{r}"
            round_seed = None if seed is None else seed + r
            fit = self._run(base, log_zeta, chains, iter_warmup, iter_sampling, round_seed,
                            round_dir, show_progress, history, **cmdstanpy_kwargs)
            est = fit.log_z()
            history.append({"round": r, "log_zeta": log_zeta, "log_z": est.log_z,
                            "std_error": est.std_error,
                            "share_near_1": float(np.mean(fit.beta() > 0.95)),
                            "share_near_0": float(np.mean(fit.beta() < 0.05))})
            logger.info("CT round %d: log zeta %.6g -> log Z %.6g +/- %.3g", r, log_zeta,
                        est.log_z, est.std_error)
            if r == opts.bootstrap_rounds:
                break
            if r > 0:
                prev = history[-2]
                if abs(est.log_z - prev["log_z"]) <= opts.bootstrap_tol * math.sqrt(
                        est.std_error**2 + prev["std_error"] ** 2):
                    logger.info("bootstrap converged after round %d", r)
                    break
            if not math.isfinite(est.log_z):
                break
            log_zeta = est.log_z
            if opts.temper == "posterior" and not isinstance(opts.base, BaseDensity):
                z = np.stack([fit._column(f"pemc_z[{j + 1}]") for j in range(self.dim)],
                             axis=-1).reshape(-1, self.dim)
                try:
                    new = moment_match(z, fit.log_weights().reshape(-1), None,
                                       opts.base_covariance)
                    new.info.update({"method": "bootstrap", "round": r + 1})
                    base = new
                except ValueError as exc:
                    logger.warning("bootstrap re-fit of the base failed (%s); keeping the "
                                   "previous base", exc)
        assert fit is not None
        fit.history = history
        return fit
