"""Running pseudo-extended MCMC: the offset pilot, then NUTS on the PE program.

``gamma~ = gamma / Z^`` needs an offset ``log Z^``; by default (``log_scale=None``)
it is the Pathfinder importance-sampling estimate of the evidence of the pilot's
search for modes (:meth:`pemc_stan.modes.pilot.BasePilot.pathfinder`, whose record
the fit's ``unvisited_modes`` check compares with where the pseudo-samples went).  It is only an
offset: modes no path found make it too low, which tilts ``q(beta)`` towards
``beta = 1`` (less tempering); when the normalising constant is known (e.g. 0
for a normalised density), pass ``log_scale``.  When Pathfinder fails, 0 is
used and a warning is logged.

Under ``temper="base"`` the pilot (:class:`pemc_stan.modes.pilot.BasePilot`)
fits the base density as well: multi-path Pathfinder, else ADVI, Laplace or a
short NUTS run, and the offset is Pathfinder's estimate or, without one, an
importance-sampling estimate from the base.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np

from pemc_stan.backend.pathfinder import estimate_log_scale
from pemc_stan.backend.progress import stage
from pemc_stan.core.base_density import BaseDensity
from pemc_stan.core.options import first_round_size
from pemc_stan.methods.pseudo_extended.fit import PseudoExtendedFit
from pemc_stan.methods.pseudo_extended.options import PseudoExtendedOptions
from pemc_stan.methods.pseudo_extended.transform import PseudoExtendedResult
from pemc_stan.methods.tempering import BetaBias
from pemc_stan.modes.pilot import BasePilot
from pemc_stan.output.diagnostics import Note
from pemc_stan.sampling.model import Found, MethodModel
from pemc_stan.sampling.warm_start import WarmStart, base_metric

logger = logging.getLogger(__name__)

__all__ = ["PseudoExtendedModel"]


class PseudoExtendedModel(MethodModel):
    """A Stan model prepared for pseudo-extended sampling.

    Parameters
    ----------
    result
        The PE transformation of the user's program (from the registry's
        ``transform_program``).
    data
        The model's data (dict or JSON path).
    original_model
        The user's compiled program, if they gave one.

    Raises
    ------
    DataError
        For data that do not match the data block (before anything is compiled).
    """

    result: PseudoExtendedResult
    _g_shape: float | None = None
    #: Pathfinder paths and draws per path of the base's pilot (as continuous tempering's:
    #: 8 paths miss a mode far less often than 4, and a base around one mode leaves the
    #: hot pseudo-samples near it).
    PILOT_PATHS = 8
    PILOT_DRAWS = 1000

    def g_shape(self) -> float | None:
        """``(d + 1)/2`` for the 'auto' instrumental ``g = Beta((d + 1)/2, 1)`` (None when the
        instrumental is not taken from the data); ``d`` is the number of unconstrained
        parameters, from the declarations and the data (or, when a size is not a data
        expression, counted from one iteration of the original model)."""
        if not self.result.g_shape_from_data:
            return None
        if self._g_shape is None:
            from pemc_stan.stan.constraints import parameter_space
            from pemc_stan.stan.evaluate import scalar_definitions, with_definitions

            env = with_definitions(self.data, scalar_definitions(self.program.tree))
            try:
                d = parameter_space(self.program.tree, env, filename=self.name).dim
            except Exception:
                run = self.original_model().sample(
                    data=self.data or None, chains=1, iter_warmup=1, iter_sampling=1, seed=1,
                    show_progress=False, show_console=False)
                d = sum(1 for c in run.column_names if not c.endswith("__"))
            self._g_shape = (d + 1.0) / 2.0
        return self._g_shape

    def pe_model(self) -> Any:
        """The compiled PE program (cached by content hash)."""
        return self.method_model()

    def log_scale(self, seed: int | None = None) -> float:
        """The offset ``log Z^`` without a base (:meth:`_scale_found`).

        Raises
        ------
        Nothing (a pilot that fails gives 0, recorded in the search's ``failure``).
        """
        return self._scale_found(seed).log_scale

    def _scale_found(self, seed: int | None) -> Found:
        """``options.log_scale``, or the Pathfinder pilot estimate; when Pathfinder fails,
        an importance-sampling estimate from a Gaussian fitted to ADVI, Laplace or a short
        NUTS run (:class:`~pemc_stan.modes.pilot.BasePilot`); 0 when they all fail (or
        the parameters have no base density), which ``failure`` records."""
        options: PseudoExtendedOptions = self.result.options
        if options.log_scale is not None:
            return Found(log_scale=float(options.log_scale))
        search = self.pilot()
        try:
            _, found, _, _ = search.pathfinder(seed)
            return Found(log_scale=float(found), search=search.search)
        except Exception as exc:
            logger.warning("the Pathfinder search for modes failed (%s); trying Pathfinder "
                           "from Stan's own inits", exc)
        pilot = estimate_log_scale(self.original_model(), self.data, seed=seed)
        if pilot.failure is None or not self.result.coordinates.blocks:
            return Found(log_scale=pilot.log_z, failure=pilot.failure)
        fallback = self.pilot()
        try:
            base, log_z = fallback.fit(seed, want_base=True, pathfinder=False)
        except Exception as exc:
            logger.warning("no approximation gave a log-scale either (%s)", exc)
            return Found(log_scale=pilot.log_z, failure=pilot.failure)
        assert base is not None and log_z is not None
        notes = (Note("pathfinder_failed", "the Pathfinder pilot of log_scale failed "
                      f"({pilot.failure}); the {base.info.get('method')} approximation "
                      "gave it by importance sampling", "nothing to do"),
                 *(Note(*n) for n in fallback.notes))
        logger.info("pilot log-scale from %s by importance sampling: %.4g",
                    base.info.get("method"), log_z)
        return Found(log_scale=log_z, notes=notes)

    def pilot(self) -> BasePilot:
        """A fresh pilot of the base and the offset, with this model's settings."""
        return BasePilot(self, self.result.coordinates, num_paths=self.PILOT_PATHS,
                         draws=self.PILOT_DRAWS, covariance=self.result.BASE_COVARIANCE)

    def fit_base(self, seed: int | None = None) -> tuple[BaseDensity, float]:
        """The base density and offset ``log Z^`` under ``temper="base"``
        (:meth:`_base_found`).

        Raises
        ------
        RuntimeError
            If no approximation of the posterior could be fitted.
        """
        found = self._base_found(seed)
        return found.base, found.log_scale

    def _base_found(self, seed: int | None) -> Found:
        """The base, the offset and the search under ``temper="base"``.

        Raises
        ------
        RuntimeError
            If no approximation of the posterior could be fitted (then NUTS
            itself cannot run the model).
        """
        options: PseudoExtendedOptions = self.result.options
        pilot = self.pilot()
        base, log_z = pilot.fit(seed, want_base=True, log_z=options.log_scale)
        assert base is not None and log_z is not None
        logger.info("pilot: base from %s, log-scale %.4g", base.info.get("method"), log_z)
        return Found(base=base, log_scale=log_z, search=pilot.search,
                     notes=tuple(Note(*n) for n in pilot.notes))

    def search_modes(self, seed: int | None) -> Found:
        """The pilot: the base and offset under ``temper="base"``, else the offset alone
        (both search for modes with Pathfinder).

        Raises
        ------
        RuntimeError
            If no approximation of the posterior could be fitted under ``temper="base"``.
        """
        return self._base_found(seed) if self.result.temper == "base" \
            else self._scale_found(seed)

    def wants_split(self) -> bool:
        """The split is tried unless ``split_modes="never"``."""
        return bool(self.result.options.split_modes == "auto")

    def inits_from_base(self, base: BaseDensity, chains: int, seed: int | None
                        ) -> list[dict[str, Any]] | None:
        """Initial values of every pseudo-sample of every chain, drawn from the base.

        Stan's default inits, uniform on (-2, 2) in the unconstrained coordinates, can put
        a copy where the model's density is numerically explosive (a time-series
        coefficient above 1 makes the errors grow geometrically); a hot copy feels only
        beta times that gradient, warm-up shrinks the step
        size to 0 and the chain never moves.  Draws from the base, fitted to the posterior
        by the pilot, start every copy where the posterior is.  The temperatures keep
        Stan's own inits.  None (Stan's inits) with ``noncentring > 0``, whose raw
        coordinates are what NUTS moves.

        Raises
        ------
        Nothing: when the base cannot be sampled in the parameters' space, None.
        """
        options: PseudoExtendedOptions = self.result.options
        if options.noncentring > 0:
            return None
        n = options.n_pseudo
        rng = np.random.default_rng(None if seed is None else [int(seed), 8191])
        try:
            draws = base.sample(self.result.coordinates, chains * n, rng, self.data)
        except Exception as exc:
            logger.info("no inits from the base (%s); Stan's random inits are used", exc)
            return None
        out: list[dict[str, Any]] = []
        for c in range(chains):
            init: dict[str, Any] = {}
            for copies in self.result.parameters:
                values = np.asarray(draws[copies.name])[c * n:(c + 1) * n]
                if copies.unrolled:
                    for k in range(n):
                        init[copies.stan_variable(k + 1)] = values[k].tolist()
                else:
                    init[copies.name] = values.tolist()
            out.append(init)
        return out

    def _base_metric(self, base: BaseDensity | None) -> WarmStart | None:
        """The base's variances as the initial inverse metric of every copy.

        (The copies' inits from the base are passed as the run's own ``inits``, so
        that they stay when CmdStan rejects the metric.)  None without a base, and
        with ``noncentring > 0``, whose raw coordinates are what NUTS moves.
        """
        options: PseudoExtendedOptions = self.result.options
        if base is None or options.noncentring > 0:
            return None
        try:
            metric = base_metric(base, self.result.coordinates, self.data,
                                 copies=options.n_pseudo,
                                 temperatures=0 if options.fixed_ladder is not None
                                 else options.n_pseudo)
        except Exception as exc:
            logger.info("no metric from the base (%s); CmdStan adapts from the unit metric",
                        exc)
            return None
        return WarmStart(inv_metric=metric, source="the pilot's base density")

    def sample(self, chains: int = 4, iter_warmup: int = 1000, iter_sampling: int = 1000,
               seed: int | None = None, output_dir: str | os.PathLike[str] | None = None,
               show_progress: bool = False, found: Found | None = None,
               **cmdstanpy_kwargs: Any) -> PseudoExtendedFit:
        """Run NUTS on the PE program from the pilot's offset and base (``found``, or
        :meth:`search_modes` when None).

        Parameters
        ----------
        chains, iter_warmup, iter_sampling, seed, output_dir, show_progress
            Passed to ``CmdStanModel.sample``.
        **cmdstanpy_kwargs
            Further ``CmdStanModel.sample`` arguments (``adapt_delta``, ...).

        Returns
        -------
        PseudoExtendedFit

        Raises
        ------
        RuntimeError
            If CmdStan fails.
        """
        found = self.search_modes(seed) if found is None else found
        base: BaseDensity | None = found.base
        scale = found.log_scale
        g_shape = self.g_shape()
        inits_given = "inits" in cmdstanpy_kwargs
        if base is not None and not inits_given:
            inits = self.inits_from_base(base, chains, seed)
            if inits is not None:
                cmdstanpy_kwargs["inits"] = inits
        pilot_notes: list[tuple[str, str, str]] = [] if found.failure is None else [(
            "pilot", f"the Pathfinder pilot of log_scale failed ({found.failure}), "
            "so log_scale = 0 was used: the temperatures may be badly scaled",
            "pass log_scale= (an estimate of log Z)")]
        bias: BetaBias | None = None
        first_round: dict[str, Any] | None = None
        if self.result.shaped:
            short = {"iter_warmup": first_round_size(iter_warmup, 2, 150),
                     "iter_sampling": first_round_size(iter_sampling, 4, 250)}
            first = self._first_round(found, g_shape, chains, short["iter_warmup"],
                                      short["iter_sampling"], seed, output_dir, show_progress,
                                      pilot_notes, **cmdstanpy_kwargs)
            bias = first.next_bias()
            beta = first.beta().reshape(-1)
            first_round = {
                **short,
                "beta_tenths": (np.histogram(beta, bins=10, range=(0.0, 1.0))[0]
                                / max(beta.size, 1)).round(4).tolist()}
            logger.info("PE: bias of g from the first round: h from %.3g to %.3g, h(1) = %.3g",
                        float(np.min(bias.values)), float(np.max(bias.values)),
                        float(bias.values[-1]))
            if not inits_given:  # the user's inits start both rounds
                cmdstanpy_kwargs["inits"] = first.continuation_inits()
        with (stage("PE round 2 of 2", bar="PE round 2/2", announce=False) if bias is not None
              else contextlib.nullcontext()):
            run = self.run_nuts(self.result.data(self.data, log_scale=scale, g_shape=g_shape,
                                                 base=base, bias=bias),
                                chains, iter_warmup, iter_sampling, seed, output_dir,
                                show_progress, self._base_metric(base), **cmdstanpy_kwargs)
        fit = PseudoExtendedFit(run, self.result, scale, data=self.data,
                                original_model=self.original_model, seed=seed, g_shape=g_shape,
                                base=base, base_notes=found.notes, pilot_notes=pilot_notes,
                                bias=bias, first_round=first_round, search=found.search)
        return fit

    def _first_round(self, found: Found, g_shape: float | None, chains: int, iter_warmup: int,
                     iter_sampling: int, seed: int | None,
                     output_dir: str | os.PathLike[str] | None, show_progress: bool,
                     pilot_notes: list[tuple[str, str, str]], **cmdstanpy_kwargs: Any
                     ) -> PseudoExtendedFit:
        """The short round with the uniform ``g`` whose copies fit the bias of the next
        (``beta_marginal="length"``), of ``iter_warmup`` and ``iter_sampling`` as given
        (:meth:`sample` asks for half the warm-up, at least 150, and a quarter of the
        draws, at least 250, as continuous tempering's bootstrap round 0); its CSVs go to
        ``output_dir/round_0``.

        Raises
        ------
        RuntimeError
            If CmdStan fails.
        """
        base, scale = found.base, found.log_scale
        round_dir = None if output_dir is None else Path(output_dir) / "round_0"
        first_seed = None if seed is None else seed + 1
        with stage("PE round 1 of 2 (fits the temperatures' bias)", bar="PE round 1/2",
                   announce=False):
            run = self.run_nuts(self.result.data(self.data, log_scale=scale, g_shape=g_shape,
                                                 base=base),
                                chains, iter_warmup, iter_sampling, first_seed, round_dir,
                                show_progress, self._base_metric(base), **cmdstanpy_kwargs)
        return PseudoExtendedFit(run, self.result, scale, data=self.data,
                                 original_model=self.original_model, seed=first_seed,
                                 g_shape=g_shape, base=base, base_notes=found.notes,
                                 pilot_notes=pilot_notes)

    def continue_from(self, fit: PseudoExtendedFit, iter_warmup: int,  # type: ignore[override]
                      iter_sampling: int, seed: int | None,
                      output_dir: str | os.PathLike[str] | None = None,
                      show_progress: bool = False, **cmdstanpy_kwargs: Any) -> PseudoExtendedFit:
        """A further run from where ``fit`` ended: the same offset, instrumental and base
        (no new pilot), every copy of every chain started at the chain's last draw, the
        warm-up started from the base's metric as the first run's.

        Raises
        ------
        RuntimeError
            If CmdStan fails.
        """
        cmdstanpy_kwargs.setdefault("inits", fit.continuation_inits())
        run = self.run_nuts(self.result.data(self.data, log_scale=fit.log_scale,
                                             g_shape=fit.g_shape, base=fit.base,
                                             bias=fit.bias),
                            fit.fit.chains, iter_warmup, iter_sampling, seed, output_dir,
                            show_progress, self._base_metric(fit.base), **cmdstanpy_kwargs)
        new = PseudoExtendedFit(run, self.result, fit.log_scale, data=self.data,
                                original_model=self.original_model, seed=seed,
                                g_shape=fit.g_shape, base=fit.base,
                                base_notes=fit.base_notes, pilot_notes=fit.pilot_notes,
                                bias=fit.bias, first_round=fit.first_round, search=fit.search)
        return new
