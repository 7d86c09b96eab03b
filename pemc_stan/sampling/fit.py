"""What every method shares: the transform result, the model and the fit.

A method (see :mod:`pemc_stan.methods.registry`) transforms the user's
program into an *extended* program whose draws carry, at each iteration,
``K`` weighted *particles* of the original parameters (``K = N``
pseudo-samples for pseudo-extended MCMC, one draw with its ``beta = 1``
weight for continuous tempering, one unweighted draw for a method that only
changes the target).  :class:`ExtendedFit` holds everything that is the
same for all of them: columns, self-normalised expectations with their Monte-Carlo
standard errors, resampled draws of the original parameters (a summed-out one drawn by
the program), the original model's transformed parameters and generated quantities on
them, NUTS diagnostics, ``summary()`` and ``to_inference_data()``.  A method overrides
only what differs: where its particles live (:meth:`ExtendedFit.particle_columns`),
their log weights (:meth:`ExtendedFit.particle_log_weights`) and its own diagnostics.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Literal

import cmdstanpy
import numpy as np
import pandas as pd
from numpy.typing import NDArray

from pemc_stan.backend.console import routed_cmdstanpy_logging
from pemc_stan.core.coordinates import coordinate_draws
from pemc_stan.core.result import TransformResult
from pemc_stan.errors import (
    FitSuspectWarning,
    ImproperPriorError,
    OptionsError,
    PemcStanError,
    emit_warning,
)
from pemc_stan.estimators import weights as W
from pemc_stan.estimators.log_z import EvidenceEstimate
from pemc_stan.estimators.normalisation import improper_prior
from pemc_stan.estimators.tails import tail_fields
from pemc_stan.output.diagnostics import (
    Reason,
    TransitionCounts,
    Verdict,
    convergence_stats,
    leapfrog_gradients,
    transition_counts,
)
from pemc_stan.output.fit_protocol import estimate_source
from pemc_stan.output.generated_quantities import (
    SAMPLER_COLUMNS,
    recompute_quantities,
    write_resampled_csvs,
)
from pemc_stan.sampling import checks
from pemc_stan.sampling.hooks import OutputExtras, WeightedEstimate
from pemc_stan.sampling.marginal import ColumnView, averaged, marginal_draws
from pemc_stan.stan.inputs import StanProgram

logger = logging.getLogger(__name__)

__all__ = ["ExtendedFit"]



class ExtendedFit:
    """A fit of a method's extended program (see the module docstring).

    Parameters
    ----------
    fit
        The cmdstanpy fit of the transformed program.
    result
        The :class:`TransformResult` it was built from.
    data
        The user's data (for generated quantities of the original model).
    original_model
        The compiled original model, or a callable returning it (compiled
        lazily, for :meth:`resampled_draws_pd` with generated quantities).
    seed
        Seed of the resampling.

    Attributes
    ----------
    fit, result, data, seed
    """

    #: Name of the particle dimension in InferenceData (None: one particle per draw).
    particle_dim: ClassVar[str | None] = None
    #: How the resampled draws are drawn (:meth:`resample_index`): ``"within_draw"``
    #: (the particles of one draw share a target) or ``"pooled"`` (one particle per
    #: draw, weights on one scale across all draws and chains).
    resampling: ClassVar[Literal["within_draw", "pooled"]] = "within_draw"
    #: The follow-up record (set per fit by ``sample``; None when it made none).
    follow_up: Any = None
    #: Steps taken before the follow-ups (the mode split's runs again, second search:
    #: :class:`~pemc_stan.sampling.follow_up.FollowUpStep`), listed first.
    split_steps: Sequence[Any] = ()
    #: The seed of the whole call that made the fit (given or drawn; set by
    #: :func:`pemc_stan.run.pipeline.run`).  ``seed`` is this run's own: a bootstrap
    #: round's or follow-up's seed is derived from it.
    run_seed: int | None = None
    #: The pilot's search for modes (:class:`~pemc_stan.core.search.ModeSearch`, or None).
    search: Any = None
    #: Floors on the standard errors of the variances (by column), carried from a run this
    #: one continued for ``sd_precision`` (:func:`~pemc_stan.sampling.checks.variance_error`).
    variance_se_floor: Mapping[str, float] = MappingProxyType({})
    #: Checks of evidence from outside the fit, set per fit by the run's plan.
    later_checks: tuple[Callable[[Any], tuple[str, Reason | None]], ...] = ()
    #: The cells' importance draws (:class:`~pemc_stan.modes.cells.CellDraws`), set per fit
    #: by the run's plan when they pass its gate: they then make every estimate
    #: (:meth:`expectation`, :meth:`summary`, :meth:`log_z`, the resampled draws), while
    #: the verdict judges the run's own draws (:meth:`run_expectation`, :meth:`run_log_z`).
    cell_estimate: Any = None
    #: Why a tempered run's estimate is its own, not its cells' (set by the run's plan).
    cell_note: str = ""
    #: Reasons that alone do not make the verdict suspect (they stay in the diagnostics).
    minor_reasons: ClassVar[frozenset[str]] = frozenset()
    #: Any divergence is suspect (NUTS on the user's model), else past DIVERGENT_SHARE_MAX.
    any_divergence: ClassVar[bool] = False
    #: Whether a follow-up can carry on from this fit (the method's ``continue_from``).
    continuable: ClassVar[bool] = True
    #: Whether the draws can reach a mode the search did not find (tempered chains can;
    #: a mode split's chains sample the found modes only): a search stopped short is
    #: then a note, and the run's own checks judge what it reached.
    reaches_unsearched: ClassVar[bool] = True
    #: The suspect verdict :meth:`summary` warned about (set per fit; it warns once).
    _suspect_warned: str | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.resampling not in ("within_draw", "pooled"):
            raise TypeError(f"{cls.__name__}.resampling = {cls.resampling!r}; expected "
                            "'within_draw' or 'pooled'")

    def __init__(self, fit: cmdstanpy.CmdStanMCMC, result: TransformResult,
                 data: Mapping[str, Any] | None = None,
                 original_model: cmdstanpy.CmdStanModel | Callable[[], cmdstanpy.CmdStanModel]
                 | None = None, seed: int | None = None) -> None:
        self.fit = fit
        self.result = result
        self.data = dict(data or {})
        self._original_model = original_model
        self.seed = seed
        self._draws = np.asarray(fit.draws(concat_chains=False), dtype=float)  # (iter, ch, col)
        self._columns = list(fit.column_names)
        self._col = {c: i for i, c in enumerate(self._columns)}
        self._resampled: pd.DataFrame | None = None
        self._index: NDArray[np.intp] | None = None
        self._chain_index: NDArray[np.intp] | None = None
        self._convergence: pd.DataFrame | None = None
        self._marginal: dict[str, NDArray[np.float64]] = {}
        self._own_particles: dict[str, list[str]] | None = None
        #: The follow-up runs ``sample`` made after the first run's verdict (FollowUp).
        self.follow_up: Any = None

    # ------------------------------------------------------------------ identity
    @property
    def method(self) -> str:
        """The canonical name of the method that made the fit (its result's method).

        Raises
        ------
        ValueError
            For a fit of a result that was not made through the registry.
        """
        return self.result.require_method().name

    @property
    def program(self) -> StanProgram:
        """The user's program."""
        return self.result.program

    # ------------------------------------------------------------------ columns
    def _column(self, name: str) -> NDArray[np.float64]:
        """One column of the extended draws, shape (chains, draws)."""
        try:
            return self._draws[:, :, self._col[name]].T.copy()
        except KeyError:
            raise KeyError(f"{name!r} is not a column of the {type(self).__name__}") from None

    def _stack(self, names: list[str]) -> NDArray[np.float64]:
        """Columns stacked last, shape (chains, draws, len(names))."""
        idx = [self._col[n] for n in names]
        return np.transpose(self._draws[:, :, idx], (1, 0, 2)).astype(float)

    def particle_columns(self) -> dict[str, list[str]]:
        """Original parameter column -> the extended columns of its ``K`` particles.

        The default: the original columns themselves, one particle each (made once:
        every expectation asks for it, and a check asks for an expectation per column).

        Raises
        ------
        Nothing.
        """
        if self._own_particles is None:
            names = set(self.program.parameter_names)
            self._own_particles = {c: [c] for c in self._columns
                                   if c.split("[")[0].split(".")[0] in names}
        return self._own_particles

    @property
    def chains(self) -> int:
        """The number of chains."""
        return int(self._draws.shape[1])

    @property
    def iterations(self) -> int:
        """The draws each chain kept."""
        return int(self._draws.shape[0])

    def parameter_columns(self) -> list[str]:
        """Columns (CmdStan names) of the original parameters, in output order."""
        return list(self.particle_columns())

    def particles(self, column: str, draw: int = 0) -> NDArray[np.float64]:
        """The particles of one original column, shape (chains, draws, K) (of a summed-out
        parameter: its draw number ``draw`` of :mod:`pemc_stan.sampling.marginal`).

        Raises
        ------
        KeyError
            If ``column`` is not a column of an original parameter.
        """
        cols = self.particle_columns().get(column)
        if cols is not None:
            return self._stack(cols)
        if column not in self.program.marginalised:
            raise KeyError(f"{column!r} is not a parameter column of the original model")
        if column not in self._marginal:  # summed out (methods.marginalise): drawn by the GQ
            stacked = {c: self._stack(k) for c, k in self.particle_columns().items()}
            self._marginal[column] = marginal_draws(self._original(), self.data, stacked,
                                                    column, self.program.name, self.seed)
        return self._marginal[column][draw]

    def particle_log_weights(self) -> NDArray[np.float64]:
        """Unnormalised log weights of the particles, shape (chains, draws, K).

        The default: equal weights (a method that only changes the target).

        Raises
        ------
        Nothing.
        """
        n_iter, n_chains = self._draws.shape[:2]
        k = len(next(iter(self.particle_columns().values()), [None]))
        return np.zeros((n_chains, n_iter, k))

    # ------------------------------------------------------------------ estimates
    def _estimate(self, h: NDArray[np.float64], mean: float | None = None,
                  tails: bool = True) -> WeightedEstimate:
        """Mean of per-draw estimates ``h`` (chains, draws), MCSE from their multi-chain ESS;
        the Pareto k of the terms' tail too unless ``tails`` is False (a part of an estimate
        whose whole is measured: the tail fit is most of the cost)."""
        ess = W.chain_ess(h)
        sd = float(np.std(h, ddof=1)) if h.size > 1 else 0.0
        centre = float(np.mean(h)) if mean is None else mean
        return WeightedEstimate(mean=centre, mcse=sd / np.sqrt(ess), ess=ess,
                                **(tail_fields(h - centre) if tails else {}))

    def _values(self, f: Callable[[Any], NDArray[np.float64]] | str) -> NDArray[np.float64]:
        """Values of ``f`` at every particle, shape (chains, draws, K) (averaged over a
        summed-out parameter's draws, :mod:`pemc_stan.sampling.marginal`)."""
        return averaged(self, (lambda v: v[f]) if isinstance(f, str) else f, ColumnView)

    def expectation(self, f: Callable[[Any], NDArray[np.float64]] | str, **kwargs: Any
                    ) -> WeightedEstimate:
        """``E[f(x)]`` and its Monte-Carlo standard error: the cells' (:attr:`cell_estimate`;
        ``f`` a column or a callable of a view ``column -> values at the cells' draws``) when
        the run has them and ``kwargs`` name no estimator of the run, else the run's own
        (:meth:`run_expectation`, given ``kwargs``).

        Raises
        ------
        KeyError
            For an unknown column.
        ValueError
            For a callable returning the wrong shape, or an unknown keyword value.
        """
        if self.cell_estimate is not None and not kwargs:
            return self.cell_estimate.expectation(f)
        return self.run_expectation(f, **kwargs)

    def run_expectation(self, f: Callable[[Any], NDArray[np.float64]] | str
                        ) -> WeightedEstimate:
        """The run's own ``E[f(x)]`` with within-draw self-normalised weights, and its MCSE.

        The estimate is ``mean_t h_t`` with ``h_t = sum_i W_ti f(x_ti)``; the
        MCSE is ``sd(h) / sqrt(ESS(h))`` with the autocorrelation-aware
        multi-chain ESS of :func:`pemc_stan.estimators.weights.chain_ess`.

        Parameters
        ----------
        f
            A column of an original parameter (``"x"``, ``"theta[2]"``) for its
            mean, or a callable taking a view ``column -> particles`` and
            returning an array of the particles' shape.

        Raises
        ------
        KeyError
            For an unknown column.
        ValueError
            For a callable returning the wrong shape.
        """
        values = self._values(f)
        lw = self.particle_log_weights()
        if values.shape != lw.shape:
            raise ValueError(f"f returned shape {values.shape}; expected (chains, draws, "
                             f"particles) = {lw.shape}")
        wn = np.exp(W.log_normalise(lw, axis=-1))
        h = np.sum(np.where(wn > 0, wn * values, 0.0), axis=-1)
        return self._estimate(h)

    def summary(self, **kwargs: Any) -> pd.DataFrame:
        """Every original parameter column (summed-out too), then every transformed
        parameter and generated quantity (from their resampled draws), as the command
        line's table shows them: the weighted ``mean``, its ``mcse``, the ``ess`` behind it
        and the Pareto ``khat`` of its terms' tail (above the bound for their number, the
        ``mcse`` is not reliable: the verdict's ``tails`` note names them); the resampled
        draws' ``sd`` and
        90% interval (``hdi_5%``, ``hdi_95%``); and the ``ess_bulk``, ``ess_tail`` and
        ``r_hat`` the verdict judges.

        Parameters
        ----------
        **kwargs
            Passed to :meth:`expectation` (e.g. ``estimator=`` of PE fits).

        Raises
        ------
        ValueError
            For an invalid keyword value.
        """
        import arviz as az

        draws = self.resampled_parameters_pd()
        mixing = self.convergence()
        rows = []
        for c in (*self.parameter_columns(), *self.program.marginalised):
            est = self.expectation(c, **kwargs)
            row: dict[str, Any] = {"name": c, "mean": est.mean, "mcse": est.mcse,
                                   "ess": est.ess, "khat": est.khat}
            x = draws[c].to_numpy(dtype=float) if c in draws else np.full(0, np.nan)
            x = x[np.isfinite(x)]
            if x.size > 1:
                lo, hi = (float(v) for v in az.hdi(x, hdi_prob=0.9))
                row.update({"sd": float(np.std(x, ddof=1)), "hdi_5%": lo, "hdi_95%": hi})
            if c in mixing.index:
                row.update({k: float(mixing.loc[c, k]) for k in ("ess_bulk", "ess_tail",
                                                                  "r_hat")})
            rows.append(row)
        rows += self._quantity_rows()
        columns = ["name", "mean", "mcse", "ess", "khat", "sd", "hdi_5%", "hdi_95%",
                   "ess_bulk", "ess_tail", "r_hat"]
        table = pd.DataFrame(rows, columns=columns).set_index("name")
        verdict = self.check()
        table.attrs["verdict"] = verdict.status
        table.attrs["reasons"] = [str(r) for r in verdict.reasons]
        table.attrs["notes"] = [str(r) for r in verdict.notes]
        table.attrs["follow_up"] = [] if self.follow_up is None else self.follow_up.describe()
        if not verdict.ok:
            message = f"these estimates are suspect: {verdict}"
            if message != self._suspect_warned:  # once per fit, however often it is asked
                self._suspect_warned = message
                emit_warning(message, FitSuspectWarning)
        return table

    def _quantity_rows(self) -> list[dict[str, Any]]:
        """The summary's rows of the transformed parameters and generated quantities: each
        from its resampled draws (:meth:`resampled_draws_pd`; ``mcse`` from their bulk
        ESS).  None for a program without them, or when the original model cannot compute
        them (the reason is logged)."""
        tree = self.program.tree
        if tree.transformed_parameters is None and tree.generated_quantities is None:
            return []
        try:
            full = self.resampled_draws_pd()
        except (ValueError, RuntimeError, PemcStanError, OSError) as exc:
            logger.info("no generated quantities in the summary: %s", exc)
            return []
        import arviz as az

        own = {*self.parameter_columns(), *self.program.marginalised}
        chains = full["chain__"].to_numpy(dtype=int)
        rows: list[dict[str, Any]] = []
        for c in full.columns:
            if c in own or c.endswith("__"):
                continue
            x = full[c].to_numpy(dtype=float)
            by_chain = np.stack([x[chains == k] for k in np.unique(chains)])
            if not np.all(np.isfinite(x)) or x.size < 2:
                rows.append({"name": c})
                continue
            r_hat, ess_bulk, ess_tail = convergence_stats(by_chain)
            sd = float(np.std(x, ddof=1))
            lo, hi = (float(v) for v in az.hdi(x, hdi_prob=0.9))
            ess = ess_bulk if np.isfinite(ess_bulk) else float(x.size)
            rows.append({"name": c, "mean": float(np.mean(x)), "mcse": sd / np.sqrt(ess),
                         "ess": ess, "khat": tail_fields(x - np.mean(x))["khat"], "sd": sd,
                         "hdi_5%": lo, "hdi_95%": hi, "ess_bulk": ess_bulk,
                         "ess_tail": ess_tail, "r_hat": r_hat})
        return rows

    def log_z(self) -> EvidenceEstimate | None:
        """``log Z``: the cells' (:attr:`cell_estimate`) when the run has them, else the run's
        own (:meth:`run_log_z`); None when there is none.

        Raises
        ------
        ImproperPriorError
            If a parameter has a flat, improper prior (:meth:`log_z_undefined`).
        """
        if self.cell_estimate is None:
            return self.run_log_z()
        undefined = self.log_z_undefined()
        if undefined is not None:
            raise undefined
        return self.cell_estimate.evidence()

    def run_log_z(self) -> EvidenceEstimate | None:
        """The method's own ``log Z`` estimate from the run, or None when it has none.

        Raises
        ------
        Nothing in the default.
        """
        return None

    def title(self) -> str:
        """What the run was, for titles and the console (the method's label).

        Raises
        ------
        ValueError
            For a fit of a result that was not made through the registry.
        """
        return self.result.require_method().label

    def own_estimate(self, estimator: str, **settings: Any) -> EvidenceEstimate | None:
        """``log Z`` by ``estimator`` when the fit has its own (one of the method's
        estimators, :meth:`evidence_estimate`); None when it is to be estimated from the
        resampled draws (bridge sampling).

        Raises
        ------
        ImproperPriorError
            If the evidence is undefined (an improper prior).
        """
        if estimator in self.result.require_method().estimators:
            return self.evidence_estimate(estimator, **settings)
        return None

    def evidence_estimate(self, estimator: str, **settings: Any) -> EvidenceEstimate:
        """``log Z`` by one of the method's own estimators (its registry entry's ``estimators``).

        Raises
        ------
        OptionsError
            For an estimator the method does not have.
        """
        raise OptionsError("estimator", estimator, "an estimator of this fit: 'bridge'",
                           message=f"{type(self).__name__} has no estimator {estimator!r} of "
                                   "its own; use estimator='bridge'")

    # ------------------------------------------------------------------ resampling
    def resample_index(self) -> NDArray[np.intp]:
        """What is kept at each iteration of the resampled draws, shape (chains, draws).

        ``resampling = "within_draw"``: the particle kept (0-based), multinomial
        within each draw by the normalised particle weights.  ``"pooled"``: the
        draw kept, as an index into the draws of all chains in chain order
        (chain ``c``, draw ``t`` is ``c * draws + t``), by systematic resampling
        over all draws; the indices are sorted and cut into chains of the
        original length, so resampled chain ``c`` holds mostly draws of chain
        ``c`` in their order and diagnostics across chains keep their meaning.

        Raises
        ------
        Nothing.
        """
        if self._index is None:
            rng = np.random.default_rng(self.seed)
            lw = self.particle_log_weights()
            if self.resampling == "pooled":
                if lw.shape[-1] != 1:
                    raise ValueError(f"{type(self).__name__}: pooled resampling needs one "
                                     f"particle per draw, not {lw.shape[-1]}")
                flat = W.resample_indices(lw[..., 0].reshape(-1), rng, method="systematic")
                self._index = np.sort(flat).reshape(lw.shape[:2])
            else:
                self._index = W.resample_indices(lw, rng, axis=-1)
        return self._index

    def _resampled_values(self, column: str) -> NDArray[np.float64]:
        """The kept particle's value of ``column`` at every iteration, (chains, draws)."""
        idx = self.resample_index()
        if self.resampling == "pooled":
            return self.particles(column)[..., 0].reshape(-1)[idx]
        return np.take_along_axis(self.particles(column), idx[..., None], axis=-1)[..., 0]

    def _chain_resampled_values(self, column: str) -> NDArray[np.float64]:
        """Resampled values of ``column`` with each chain's draws drawn from that chain
        alone, for the R-hat and ESS checks (do the chains agree?).  Under pooled
        resampling each chain is resampled (systematic) by its own draws' weights: the
        pooled resampling blurs the chains by moving a heavy chain's draws into its
        neighbours."""
        if self.resampling != "pooled":
            return self._resampled_values(column)
        if self._chain_index is None:
            rng = np.random.default_rng(self.seed)
            lw = self.particle_log_weights()[..., 0]
            self._chain_index = np.stack([
                np.sort(W.resample_indices(lw[c], rng, method="systematic"))
                for c in range(lw.shape[0])])
        return np.take_along_axis(self.particles(column)[..., 0], self._chain_index, axis=1)

    def _sampler_values(self, chain: int, cols: list[int]) -> NDArray[np.float64]:
        """Columns ``cols`` of the extended run's rows that go with resampled chain ``chain``."""
        if self.resampling == "pooled" and self.cell_estimate is None:  # cells: the run's rows
            draws = np.swapaxes(self._draws, 0, 1).reshape(-1, self._draws.shape[2])
            return np.asarray(draws[self.resample_index()[chain]][:, cols])
        return np.asarray(self._draws[:, chain][:, cols])

    def resampled_parameters_pd(self) -> pd.DataFrame:
        """Resampled draws of the original parameters (chains kept as chains; the cells'
        independent draws, shuffled, when they are the estimate: :attr:`cell_estimate`).

        Returns
        -------
        pandas.DataFrame
            ``chain__``, ``iter__``, ``draw__``, then the original parameter
            columns (CmdStan bracket names).
        """
        n_iter, n_chains = self._draws.shape[:2]
        frame: dict[str, Any] = {
            "chain__": np.repeat(np.arange(1, n_chains + 1), n_iter),
            "iter__": np.tile(np.arange(1, n_iter + 1), n_chains),
            "draw__": np.arange(1, n_chains * n_iter + 1),
        }
        cells = None if self.cell_estimate is None \
            else self.cell_estimate.resampled(n_chains * n_iter, self.seed)
        for c in self.parameter_columns():
            frame[c] = self._resampled_values(c).reshape(-1) if cells is None else cells[c]
        return pd.DataFrame(frame)

    def _original(self) -> cmdstanpy.CmdStanModel:
        m = self._original_model
        if m is None:
            raise ValueError("no original model available for generated quantities; pass "
                             "original_model= when building the fit")
        if not isinstance(m, cmdstanpy.CmdStanModel):
            m = m()
            self._original_model = m
        return m

    def resampled_draws_pd(self, output_dir: str | os.PathLike[str] | None = None
                           ) -> pd.DataFrame:
        """Resampled draws with the original model's transformed parameters and GQs.

        Writes the resampled parameter draws as Stan CSV files (one per chain,
        keeping the extended run's configuration comments) and runs cmdstanpy's
        standalone ``generate_quantities`` of the ORIGINAL model on them.

        Returns
        -------
        pandas.DataFrame
            ``chain__``, ``iter__``, ``draw__``, parameters, transformed
            parameters, generated quantities.

        Raises
        ------
        RuntimeError
            If CmdStan's generate_quantities fails.
        """
        if self._resampled is None:
            # without output_dir the draws are read into memory: no CSVs are left behind
            with tempfile.TemporaryDirectory(prefix="pemc_gq_") as tmp, \
                    routed_cmdstanpy_logging():
                self._resampled = recompute_quantities(
                    self.program, self.data, self.resampled_parameters_pd(), self._write_csvs,
                    self._original, self.seed, Path(output_dir or tmp))
        return self._resampled

    def _write_csvs(self, params: pd.DataFrame, out_dir: Path) -> list[str]:
        sampler = [c for c in SAMPLER_COLUMNS if c in self._col]
        cols = [self._col[c] for c in sampler]
        values = [self._sampler_values(chain, cols) for chain in range(self._draws.shape[1])]
        return write_resampled_csvs(self.fit.runset.csv_files, params, sampler, values, out_dir)

    def extended_draws_pd(self) -> pd.DataFrame:
        """All draws of the extended program, as cmdstanpy gives them."""
        return self.fit.draws_pd()

    # ------------------------------------------------------------------ cost and state
    def gradients(self) -> int:
        """Gradient evaluations of the run and of the runs it continued (bootstrap
        rounds); by default :meth:`run_gradients`.

        Raises
        ------
        Nothing.
        """
        return self.run_gradients()

    def run_gradients(self) -> int:
        """Gradient evaluations of this run: the sampling iterations' leapfrog steps (a
        saved draw stands for ``thin`` iterations) plus the warm-up's at their mean, a lower
        estimate (CmdStan does not save the warm-up's own).

        Raises
        ------
        Nothing.
        """
        col = self._col.get("n_leapfrog__")
        if col is None:
            return 0
        return leapfrog_gradients(self._draws[:, :, col],
                                  getattr(self.fit.metadata, "cmdstan_config", {}))

    def continuation_inits(self) -> list[dict[str, Any]]:
        """Initial values that continue each chain from its last draw (every variable
        of the extended program; CmdStan reads the parameters' entries).

        Raises
        ------
        Nothing.
        """
        stan_vars = self.fit.metadata.stan_vars
        return [{name: np.asarray(var.extract_reshape(self._draws[-1, c])).tolist()
                 for name, var in stan_vars.items()}
                for c in range(self._draws.shape[1])]

    # ------------------------------------------------------------------ diagnostics
    def nuts_counts(self) -> TransitionCounts:
        """Divergences and max-treedepth hits of the extended run.

        Raises
        ------
        Nothing.
        """
        return transition_counts(self.fit, self._draws, self._col)

    def diagnostics(self, warn: bool = True) -> dict[str, Any]:
        """NUTS diagnostics with advice (methods add their own).

        Returns
        -------
        dict
            ``divergences``, ``max_treedepth_hits``, ``messages``.
        """
        from pemc_stan.output.diagnostics import treedepth_advice

        nuts = self.nuts_counts()
        msgs = [f"{nuts.divergences} divergent transitions: increase adapt_delta."] \
            if nuts.divergences else []
        deeper = treedepth_advice(nuts)
        if deeper:
            msgs.append(deeper)
        return self._report({"divergences": nuts.divergences,
                             "max_treedepth_hits": nuts.max_treedepth_hits}, msgs, warn,
                            UserWarning)

    def check(self) -> Verdict:
        """The fit's verdict: ``ok``, or ``suspect`` with named reasons and what to do.

        Made from evidence the fit already has (no new run): divergences, R-hat
        and bulk ESS of the resampled draws of every original parameter, whether
        the chains agree on the weighted means, and each method's own checks
        (temperatures, weights, pilots; see the method's fit class).  Thresholds
        are the constants of :mod:`pemc_stan.output.diagnostics`; what alone is not
        suspect, :func:`~pemc_stan.sampling.checks.minor_reasons`.

        Raises
        ------
        Nothing beyond the fit's own errors.
        """
        reasons: list[Reason] = []
        names: list[str] = []
        noted: list[Reason] = []  # findings on evidence that is itself unchecked
        for name, found in (*self._shared_checks(), *self.method_checks()):
            names.append(name)
            if found is not None:
                (noted if found.note else reasons).append(found)
        notes = (*noted, *checks.tail_notes(self))
        if reasons and all(r.name in checks.minor_reasons(self) for r in reasons):
            return Verdict((), tuple(names), notes)
        return Verdict(tuple(reasons), tuple(names), notes)

    def convergence(self) -> pd.DataFrame:
        """R-hat, bulk and tail ESS of the resampled draws of every original parameter column,
        computed once per fit on the draws the verdict judges (each chain resampled by its
        own weights, :meth:`_chain_resampled_values`); the verdict and the summary read it.
        Each group of chains (:meth:`chain_groups`) is judged apart; a row shows the worst
        group's figures.

        Returns
        -------
        pandas.DataFrame
            Index: the parameter columns (CmdStan names, ``L[2,1]``); columns
            ``r_hat``, ``ess_bulk``, ``ess_tail``.

        Raises
        ------
        Nothing beyond the fit's own errors.
        """
        cached: pd.DataFrame | None = getattr(self, "_convergence", None)
        if cached is None:
            columns = self.parameter_columns()
            groups = self.chain_groups()
            rows = []
            for c in columns:  # each group of chains apart; the worst group counts
                values = self._chain_resampled_values(c)
                stats = np.array([convergence_stats(values[groups == g])
                                  for g in np.unique(groups)], dtype=float)
                rows.append((float(np.max(stats[:, 0])), float(np.min(stats[:, 1])),
                             float(np.min(stats[:, 2]))))
            cached = pd.DataFrame(rows, index=pd.Index(columns, name="name"),
                                  columns=["r_hat", "ess_bulk", "ess_tail"], dtype=float)
            self._convergence = cached
        return cached.copy()

    def worst_rhat(self) -> float:
        """The largest finite R-hat of :meth:`convergence` (the verdict's ``rhat`` check),
        NaN when no column has one.

        Raises
        ------
        Nothing beyond the fit's own errors.
        """
        rhat = self.convergence()["r_hat"].to_numpy(dtype=float)
        finite = rhat[np.isfinite(rhat)]
        return float(finite.max()) if finite.size else float("nan")

    def log_z_undefined(self) -> ImproperPriorError | None:
        """Why ``log Z`` of this fit's model is undefined, or None when it is defined.

        ``log Z`` needs a proper prior: a parameter with a flat, improper prior makes its
        scale arbitrary.  This is the check of :func:`pemc_stan.evidence` (which raises
        the error returned here), so :meth:`log_z`, ``estimates.json`` and the command
        line refuse the same models it does.

        Raises
        ------
        Nothing (the error is returned, not raised).
        """
        return improper_prior(self.program.original or self.program, self.data)

    def chain_groups(self) -> NDArray[np.intp]:
        """The group of each chain, shape (chains,): chains of one group sample the same
        distribution, so R-hat and the chains' agreement are judged within groups.  The
        default: one group (every chain samples the whole extended target).

        Raises
        ------
        Nothing.
        """
        return np.zeros(self._draws.shape[1], dtype=np.intp)

    def chain_expectations(self, column: str) -> tuple[NDArray[np.float64],
                                                       NDArray[np.float64]]:
        """Each chain's weighted mean of ``column`` and its Monte-Carlo standard error.

        Raises
        ------
        KeyError
            For an unknown column.
        """
        lw = self.particle_log_weights()
        wn = np.exp(W.log_normalise(lw, axis=-1))
        h = np.sum(np.where(wn > 0, wn * self.particles(column), 0.0), axis=-1)
        means, ses = [], []
        for chain in h:
            ess = W.chain_ess(chain[None, :]) if chain.size > 3 and np.ptp(chain) > 0 else 1.0
            means.append(float(np.mean(chain)))
            ses.append(float(np.std(chain, ddof=1) / np.sqrt(max(ess, 1.0))))
        return np.asarray(means), np.asarray(ses)

    def particle_coordinates(self) -> NDArray[np.float64] | None:
        """Base coordinates (M, D) of every particle in the order of ``target_weights()``
        flattened; None when the parameters have no base coordinates.

        Raises
        ------
        Nothing (None when the coordinates cannot be computed).
        """
        coords = getattr(self.result, "coordinates", None)
        if coords is None or not coords.blocks:
            return None
        columns = self.parameter_columns()
        try:
            values = np.stack([self.particles(c).reshape(-1) for c in columns], axis=-1)
            z, _ = coords.forward(coordinate_draws(coords, values, columns, self.data),
                                  self.data)
        except Exception as exc:  # a type without coordinates, a missing column
            logger.info("no base coordinates of the draws (%s)", exc)
            return None
        return np.asarray(z, dtype=float)

    def target_weights(self) -> NDArray[np.float64]:
        """Each particle's weight in :meth:`expectation`, (chains, draws, K), summing to one
        (over all draws when ``resampling="pooled"``, else within a draw / the draws).

        Raises
        ------
        Nothing.
        """
        lw = self.particle_log_weights()
        if self.resampling == "pooled":
            return np.exp(W.log_normalise(lw.reshape(-1))).reshape(lw.shape)
        return np.exp(W.log_normalise(lw, axis=-1)) / (lw.shape[0] * lw.shape[1])

    def unvisited_modes(self) -> list[tuple[int, float]]:
        """The pilot's modes to which the target estimates give less than one effective
        draw's weight (:func:`~pemc_stan.sampling.checks.unvisited_modes`).

        Raises
        ------
        Nothing.
        """
        return checks.unvisited_modes(self)

    def method_checks(self) -> Iterator[tuple[str, Reason | None]]:
        """The method's own ``(check name, Reason or None)`` pairs, after the shared ones.

        Raises
        ------
        Nothing in the default (which has none).
        """
        return iter(())

    def _shared_checks(self) -> Iterator[tuple[str, Reason | None]]:
        """The ``(check name, Reason or None)`` pairs every method's fit is judged by."""
        return checks.shared_checks(self)

    def _report(self, info: dict[str, Any], msgs: list[str], warn: bool,
                category: type[Warning]) -> dict[str, Any]:
        """Attach the pilot's search, the follow-up steps and the stages' wall seconds
        and the advice to ``info``; with ``warn``, warn and log each message."""
        if self.search is not None:
            info["pilot_modes"] = self.search.describe()
            info["modes_found"] = self.search.major_modes
            info["search_radius"] = self.search.radius
        if self.follow_up is not None:
            info.update({"follow_up": self.follow_up.describe()} if self.follow_up.steps else {})
        info["estimate"] = estimate_source(self)
        info["messages"] = msgs
        if warn:
            for m in msgs:
                emit_warning(m, category, stacklevel=3)
        return info

    # ------------------------------------------------------------------ output
    def output_extras(self) -> OutputExtras:
        """The method's own attributes, settings and variables for the InferenceData
        and the run folder (the default has none).

        Raises
        ------
        Nothing.
        """
        return OutputExtras()

    def to_inference_data(self, **kwargs: Any) -> Any:
        """ArviZ InferenceData of this fit (see :mod:`pemc_stan.output.inference_data`).

        Raises
        ------
        RuntimeError
            If the original model's generate_quantities fails.
        """
        from pemc_stan.output.inference_data import to_inference_data

        return to_inference_data(self, **kwargs)
