"""ArviZ InferenceData from pseudo-extended and continuously tempered fits.

:func:`to_inference_data` (alias :func:`from_pemc_stan`, in the style of
``az.from_cmdstanpy``) converts a
:class:`~pemc_stan.methods.pseudo_extended.fit.PseudoExtendedFit` or a
:class:`~pemc_stan.methods.continuous_tempering.fit.ContinuousTemperingFit` into an
:class:`arviz.InferenceData` with the groups

``posterior``
    Resampled draws of the ORIGINAL model's parameters, transformed
    parameters and generated quantities (``fit.resampled_draws_pd()``: one
    pseudo-sample per iteration for PE, draws resampled by ``w1`` for CT;
    chains stay chains; when a tempered fit reports its cells' estimate, their
    independent importance draws resampled by weight, shuffled into chains).  These
    are (approximately) draws from the target and are what ``az.summary``,
    ``az.plot_trace`` and ``az.plot_pair`` look at.
``sample_stats``
    CmdStan's NUTS statistics of the extended run in ArviZ's names (``lp``,
    ``acceptance_rate``, ``step_size``, ``tree_depth``, ``n_steps``,
    ``diverging``, ``energy``) plus the method's quantities: for PE
    ``beta``, ``log_weight``, ``weight`` (normalised within the draw) with dim
    ``pseudo``, ``weight_ess`` (per draw, in [1, N]) and ``resample_index``
    (1-based pseudo-sample kept in ``posterior``); for CT ``beta``,
    ``delta`` (eq 17), ``log_weight`` (``log w1``, eq 20) and ``weight``
    (``w1`` normalised over all draws).
``extended_posterior``
    The draws of the extended space itself, the method's own quantities under
    the reserved prefix (so they never clash with a user parameter such as
    ``beta``): for PE every pseudo-sample of every parameter (dim ``pseudo``);
    for CT the ``x`` draws with the CT program's own parameters.  Their
    temperatures and weights are in ``sample_stats`` (each draw kept once).
``log_likelihood``
    The generated quantity ``log_lik`` (or the names given as ``log_likelihood=``), taken
    out of ``posterior`` with the same resampled draws, so that ``az.loo`` and
    ``az.compare`` read it as they read ``az.from_cmdstanpy(log_likelihood="log_lik")``.
``observed_data`` / ``constant_data``
    The user's data: variables that are the variate of a likelihood term
    (see :mod:`pemc_stan.stan.analysis`) are observed, the rest constant.

Dimensions are named after the size expressions of the Stan declarations when
these are plain variables (``vector[K] mu`` has dim ``K_dim``; the suffix keeps
it apart from the data variable ``K`` in ``constant_data``), otherwise
``<name>_dim_<i>``; coordinates are Stan's 1-based indices, so ``mu[2]`` in
Stan is ``posterior.mu.sel(K_dim=2)`` and ``az.summary`` labels it ``mu[2]``.

Attributes (on every group, so they survive NetCDF): ``pemc_method``,
``pemc_options`` (JSON), ``pemc_seed`` (the seed that repeats the run),
``pemc_estimate`` (JSON: the run's own draws or its cells', and why),
``pemc_log_scale`` (PE) / ``pemc_log_zeta`` (CT),
``pemc_n_pseudo`` (PE), and when an evidence estimate is known
``pemc_log_z``, ``pemc_log_z_std_error``, ``pemc_log_z_method``; when the
evidence is undefined (an improper prior) ``pemc_log_z_undefined`` says why.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from pemc_stan._version import __version__
from pemc_stan.errors import ImproperPriorError
from pemc_stan.output.fit_protocol import estimate_source, fit_seed, judged_run
from pemc_stan.stan import ast

logger = logging.getLogger(__name__)

__all__ = ["InferenceDataConverter", "to_inference_data", "from_pemc_stan", "EXTENDED_GROUP"]

#: Name of the group holding the extended-space draws.
EXTENDED_GROUP = "extended_posterior"

#: CmdStan sampler columns and their ArviZ names.
SAMPLER_STATS = {
    "lp__": "lp",
    "accept_stat__": "acceptance_rate",
    "stepsize__": "step_size",
    "treedepth__": "tree_depth",
    "n_leapfrog__": "n_steps",
    "divergent__": "diverging",
    "energy__": "energy",
}

_INDEX_COLUMNS = ("chain__", "iter__", "draw__")
_COLUMN_RE = re.compile(r"^([^\[\]]+)\[([0-9,\s]+)\]$")
# matrix-shaped types declared with one size
_SQUARE = {"cov_matrix", "corr_matrix", "cholesky_factor_corr"}


def _json_default(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    return repr(value)


def options_json(options: Any) -> str:
    """The options of a fit as a JSON string (dataclass fields, tuples as lists).

    Raises
    ------
    Nothing (unknown objects are written as their ``repr``).
    """
    if dataclasses.is_dataclass(options) and not isinstance(options, type):
        payload: Any = {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}
    elif isinstance(options, Mapping):
        payload = dict(options)
    else:
        payload = {"repr": repr(options)}
    return json.dumps(payload, default=_json_default, sort_keys=True)


def _declared_types(program: ast.Program, attrs: Iterable[str]) -> dict[str, ast.Type]:
    """Top-level declarations (name -> type) of the given program blocks."""
    out: dict[str, ast.Type] = {}
    for attr in attrs:
        block = getattr(program, attr)
        if block is None:
            continue
        for stmt in block.stmts:
            if isinstance(stmt, ast.VarDecl):
                for name in stmt.names:
                    out[name] = stmt.type
    return out


def _size_names(type_: ast.Type) -> list[str | None] | None:
    """Dimension names of a declared type in output order (None: unnamed); None if unknown.

    ``array[N] vector[K]`` gives ``["N_dim", "K_dim"]``; ``cov_matrix[K]`` gives
    ``["K_dim", "K_dim"]`` (made unique by the caller); literal or compound sizes give None
    entries.  Tuples and complex types give None (the shape is taken from the draws).
    """
    def name(expr: ast.Expr) -> str | None:
        return f"{expr.name}_dim" if isinstance(expr, ast.Variable) else None

    if isinstance(type_, ast.ArrayType):
        inner = _size_names(type_.element)
        return None if inner is None else [name(d) for d in type_.dims] + inner
    if not isinstance(type_, ast.BasicType):
        return None
    if "complex" in type_.name:
        return None
    sizes = [name(s) for s in type_.sizes]
    if type_.name in _SQUARE or (type_.name == "cholesky_factor_cov" and len(sizes) == 1):
        return sizes * 2
    return sizes


def _split_column(column: str) -> tuple[str, tuple[int, ...]] | None:
    """``"mu[2,3]"`` -> ``("mu", (2, 3))``, ``"s"`` -> ``("s", ())``; None for other forms."""
    m = _COLUMN_RE.match(column)
    if m is not None:
        return m.group(1), tuple(int(i) for i in m.group(2).split(","))
    if re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", column):
        return column, ()
    return None


def _safe_name(column: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", column).strip("_") or "value"


class InferenceDataConverter:
    """Build the groups of an InferenceData from a pemc-stan fit.

    Parameters
    ----------
    fit
        A PseudoExtendedFit or ContinuousTemperingFit (anything with
        ``method``, ``fit``, ``result``, ``data`` and ``resampled_draws_pd()``
        as documented in the module docstring).
    evidence
        An evidence estimate (``log_z``, ``std_error``, ``method``) to record
        in the attributes; by default ``fit.log_z()`` when the fit has it.
    include_extended
        Add the ``extended_posterior`` group.
    output_dir
        Where the original model's generated quantities are run (passed to
        ``fit.resampled_draws_pd``; default a temporary directory).
    log_likelihood
        Names of the pointwise log-likelihood generated quantities (the
        ``log_likelihood`` group).

    Raises
    ------
    TypeError
        If ``fit`` is not a pemc-stan fit.
    """

    def __init__(self, fit: Any, evidence: Any = None, include_extended: bool = True,
                 output_dir: str | None = None,
                 log_likelihood: str | Iterable[str] | None = "log_lik") -> None:
        try:
            method = fit.result.method
            made_by_a_method = method is not None and callable(fit.output_extras)
        except AttributeError:
            made_by_a_method = False
        if not made_by_a_method:
            raise TypeError(
                f"to_inference_data expects the fit of a pemc-stan method (e.g. a "
                f"PseudoExtendedFit or ContinuousTemperingFit), got {type(fit).__name__}; for "
                "a plain cmdstanpy fit use arviz.from_cmdstanpy")
        self.method: str = fit.method
        self.fit = fit
        self._extras: Any = None
        self.evidence = evidence
        self.include_extended = include_extended
        self.output_dir = output_dir
        self.log_likelihood = ([] if log_likelihood is None else [log_likelihood]
                               if isinstance(log_likelihood, str) else list(log_likelihood))
        self.program = fit.program.tree
        self._types = _declared_types(self.program, ("data", "parameters",
                                                     "transformed_parameters",
                                                     "generated_quantities"))
        self._dim_sizes: dict[str, int] = {}
        self._n_chains, self._n_draws = self._chain_draws()

    # ------------------------------------------------------------------ helpers
    def _chain_draws(self) -> tuple[int, int]:
        raw = self.fit.fit.draws(concat_chains=False)  # (draws, chains, columns)
        return int(raw.shape[1]), int(raw.shape[0])

    def _dims_for(self, var: str, shape: tuple[int, ...]) -> list[str]:
        """Dimension names of ``var`` with the given shape, consistent across groups."""
        declared = _size_names(self._types[var]) if var in self._types else None
        if declared is None or len(declared) != len(shape):
            declared = [None] * len(shape)
        dims: list[str] = []
        for i, (dim, size) in enumerate(zip(declared, shape, strict=True)):
            if dim is None or dim in dims or self._dim_sizes.get(dim, size) != size:
                dim = f"{var}_dim_{i}"
            self._dim_sizes[dim] = size
            dims.append(dim)
        return dims

    def _coords(self, dims: Iterable[str]) -> dict[str, NDArray[np.int64]]:
        return {d: np.arange(1, self._dim_sizes[d] + 1) for d in dims if d in self._dim_sizes}

    def _frame_to_arrays(self, df: pd.DataFrame) -> dict[str, NDArray[Any]]:
        """Columns of a draws frame (``chain__``, ``iter__``, bracket names) -> (chain, draw,
        ...)."""
        df = df.sort_values(["chain__", "iter__"], kind="stable")
        chains = sorted(df["chain__"].unique())
        counts = df.groupby("chain__").size()
        n_draws = int(counts.min())
        if int(counts.max()) != n_draws:
            logger.warning("chains hold %d to %d draws; keeping the first %d of each",
                           n_draws, int(counts.max()), n_draws)
        blocks = [df[df["chain__"] == c].iloc[:n_draws] for c in chains]
        groups: dict[str, list[tuple[tuple[int, ...], str]]] = {}
        for col in df.columns:
            if col in _INDEX_COLUMNS:
                continue
            split = _split_column(col)
            if split is None:
                groups.setdefault(_safe_name(col), []).append(((), col))
            else:
                groups.setdefault(split[0], []).append((split[1], col))
        out: dict[str, NDArray[Any]] = {}
        for var, entries in groups.items():
            ndim = {len(idx) for idx, _ in entries}
            if len(ndim) != 1:  # inconsistent naming: keep columns apart
                for _, col in entries:
                    out[_safe_name(col)] = np.stack([b[col].to_numpy() for b in blocks])
                continue
            if ndim == {0}:
                out[var] = np.stack([b[entries[0][1]].to_numpy() for b in blocks])
                continue
            shape = tuple(max(idx[k] for idx, _ in entries) for k in range(ndim.pop()))
            arr = np.full((len(blocks), n_draws, *shape), np.nan)
            for idx, col in entries:
                pos = tuple(i - 1 for i in idx)
                key: tuple[Any, ...] = (slice(None), slice(None), *pos)
                arr[key] = np.stack([b[col].to_numpy() for b in blocks])
            out[var] = arr
        return out

    def _dataset(self, arrays: Mapping[str, NDArray[Any]], lead: tuple[str, ...] = (),
                 ) -> Any:
        """An xarray Dataset with dims (chain, draw, *lead, *declared dims)."""
        import xarray as xr

        data_vars = {}
        coords: dict[str, Any] = {}
        for var, arr in arrays.items():
            shape = arr.shape[2 + len(lead):]
            dims = ["chain", "draw", *lead, *self._dims_for(var, shape)]
            data_vars[var] = (dims, arr)
            coords.update(self._coords(dims[2:]))
        coords["chain"] = np.arange(self._n_chains)
        coords["draw"] = np.arange(self._n_draws)
        first = next(iter(arrays.values()), None)
        if first is not None:
            coords["chain"] = np.arange(first.shape[0])
            coords["draw"] = np.arange(first.shape[1])
        return xr.Dataset(data_vars, coords=coords)

    def _particle_coords(self, dim: str, size: int) -> dict[str, NDArray[np.int64]]:
        self._dim_sizes[dim] = size
        return {dim: np.arange(1, size + 1)}

    # ------------------------------------------------------------------ attributes
    def attributes(self) -> dict[str, Any]:
        """Attributes recording the method, its options and the evidence estimate.

        Returns
        -------
        dict
            NetCDF-compatible values (strings and numbers).

        Raises
        ------
        Nothing (a failing ``fit.log_z()`` is logged and left out).
        """
        fit = self.fit
        attrs: dict[str, Any] = {
            "inference_library": "pemc-stan",
            "inference_library_version": __version__,
            "pemc_method": self.method,
            "pemc_options": options_json(fit.result.options),
        }
        seed = fit_seed(fit)
        if seed is not None:  # the seed that repeats the run (given or drawn)
            attrs["pemc_seed"] = seed
        attrs.update(self.extras.attributes)
        if fit.follow_up is not None:
            attrs["pemc_follow_up"] = json.dumps(fit.follow_up.as_dict())
        attrs["pemc_estimate"] = json.dumps(estimate_source(fit))
        judged = judged_run(fit)
        judged.pop("csv_folder", None)  # where it was written; estimates.json says, relative
        if judged:  # chains, iterations and settings of the run the verdict judged
            attrs["pemc_judged_run"] = json.dumps(judged)
        search = fit.search
        if search is not None:
            attrs.update({"pemc_modes_found": int(search.major_modes),
                          "pemc_search_radius": float(search.radius),
                          "pemc_search": json.dumps(search.as_dict())})
        estimate = self.evidence
        if estimate is None:
            try:
                estimate = fit.log_z()
            except ImproperPriorError as exc:  # the evidence is undefined: say why instead
                attrs["pemc_log_z_undefined"] = str(exc)
            except Exception as exc:
                logger.warning("no evidence estimate recorded: fit.log_z() failed (%s)", exc)
        if estimate is not None:
            attrs["pemc_log_z"] = float(estimate.log_z)
            attrs["pemc_log_z_std_error"] = float(estimate.std_error)
            attrs["pemc_log_z_method"] = str(estimate.method)
        return attrs

    @property
    def extras(self) -> Any:
        """The fit's :meth:`output_extras`, computed once per conversion."""
        if self._extras is None:
            self._extras = self.fit.output_extras()
        return self._extras

    # ------------------------------------------------------------------ groups
    def posterior_to_xarray(self) -> Any:
        """Resampled draws of the original parameters, TPs and GQs.

        Raises
        ------
        RuntimeError
            If the original model's ``generate_quantities`` fails.
        """
        df = self.fit.resampled_draws_pd(output_dir=self.output_dir)
        return self._dataset(self._frame_to_arrays(df))

    def _sampler_arrays(self) -> dict[str, NDArray[Any]]:
        raw = self.fit.fit.draws(concat_chains=False)
        cols = list(self.fit.fit.column_names)
        out: dict[str, NDArray[Any]] = {}
        for stan_name, az_name in SAMPLER_STATS.items():
            if stan_name in cols:
                values = np.transpose(raw[:, :, cols.index(stan_name)])
                if az_name == "diverging":
                    values = values.astype(bool)
                elif az_name in ("tree_depth", "n_steps"):
                    values = values.astype(np.int64)
                out[az_name] = values
        return out

    def sample_stats_to_xarray(self) -> Any:
        """NUTS statistics of the extended run plus weights, beta and weight ESS.

        Raises
        ------
        Nothing beyond the fit's own errors.
        """
        import xarray as xr

        stats = self._dataset(self._sampler_arrays())
        extras = self.extras
        extra, attrs = extras.sample_stats, extras.sample_stats_attrs
        coords: dict[str, Any] = {}
        dim = self.fit.particle_dim
        for dims, values in extra.values():
            if dim is not None and dim in dims:
                coords.update(self._particle_coords(dim, values.shape[dims.index(dim)]))
        out = stats.assign({k: xr.Variable(*v) for k, v in extra.items()}).assign_coords(coords)
        out.attrs.update(attrs)
        return out

    def extended_posterior_to_xarray(self) -> Any:
        """The extended-space draws with their log weights (see the module docstring).

        Raises
        ------
        Nothing beyond the fit's own errors.
        """
        fit = self.fit
        dim = fit.particle_dim
        extra = self.extras.extended
        if dim is not None:  # every particle of every parameter, along the particle dim
            grouped: dict[str, list[tuple[tuple[int, ...], NDArray[np.float64]]]] = {}
            for col in fit.parameter_columns():
                split = _split_column(col)
                var, idx = split if split is not None else (_safe_name(col), ())
                grouped.setdefault(var, []).append((idx, fit.particles(col)))
            arrays: dict[str, NDArray[Any]] = {}
            for var, entries in grouped.items():
                first = entries[0][1]
                if not entries[0][0]:
                    arrays[var] = first
                    continue
                shape = tuple(max(idx[k] for idx, _ in entries)
                              for k in range(len(entries[0][0])))
                arr = np.full((*first.shape, *shape), np.nan)
                for idx, values in entries:
                    where: tuple[Any, ...] = (Ellipsis, *(i - 1 for i in idx))
                    arr[where] = values
                arrays[var] = arr
            coords = self._particle_coords(dim, int(first.shape[2]))
            ds = self._dataset(arrays, lead=(dim,))
            ds = ds.assign({name: (("chain", "draw", dim)[:values.ndim], values)
                            for name, values in extra.items()})
            return ds.assign_coords(coords)
        df = fit.extended_draws_pd()
        if "chain__" not in df.columns or "iter__" not in df.columns:
            df = df.copy()
            n = self._n_draws
            df["chain__"] = np.repeat(np.arange(1, self._n_chains + 1), n)[: len(df)]
            df["iter__"] = np.tile(np.arange(1, n + 1), self._n_chains)[: len(df)]
        keep = [c for c in df.columns if c in _INDEX_COLUMNS or not c.endswith("__")]
        arrays = self._frame_to_arrays(df[keep])
        for name, values in extra.items():
            arrays.setdefault(name, values)
        return self._dataset(arrays)

    def _data_arrays(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(observed, constant) data variables as xarray (dims, values) pairs."""
        data = dict(self.fit.data or {})
        declared = _declared_types(self.program, ("data",))
        observed_names: set[str] = set()
        try:
            for c in self.fit.program.analysis.contributions:
                if c.kind == "likelihood" and c.variate is not None:
                    observed_names.update(n.name for n in ast.walk(c.variate)
                                          if isinstance(n, ast.Variable) and n.name in declared)
        except Exception as exc:
            logger.debug("could not classify data as observed (%s)", exc)
        observed: dict[str, Any] = {}
        constant: dict[str, Any] = {}
        for name in declared:
            if name not in data:
                continue
            values = np.asarray(data[name])
            if values.dtype == object:
                continue  # tuples: not representable
            dims = self._dims_for(name, values.shape)
            (observed if name in observed_names else constant)[name] = (dims, values)
        return observed, constant

    def data_to_xarray(self) -> tuple[Any, Any]:
        """``(observed_data, constant_data)`` datasets (None when empty).

        Raises
        ------
        Nothing.
        """
        import xarray as xr

        out: list[Any] = []
        for arrays in self._data_arrays():
            if not arrays:
                out.append(None)
                continue
            dims = {d for dd, _ in arrays.values() for d in dd}
            out.append(xr.Dataset(arrays, coords=self._coords(dims)))
        return out[0], out[1]

    def to_inference_data(self) -> Any:
        """Assemble the :class:`arviz.InferenceData` (see the module docstring).

        Returns
        -------
        arviz.InferenceData

        Raises
        ------
        RuntimeError
            If the original model's ``generate_quantities`` fails.
        """
        import arviz as az

        posterior = self.posterior_to_xarray()
        groups: dict[str, Any] = {"posterior": posterior,
                                  "sample_stats": self.sample_stats_to_xarray()}
        pointwise = [n for n in self.log_likelihood if n in posterior.data_vars]
        if pointwise:  # the same resampled draws as the posterior's
            groups["log_likelihood"] = posterior[pointwise]
            groups["posterior"] = posterior.drop_vars(pointwise)
        if self.include_extended:
            groups[EXTENDED_GROUP] = self.extended_posterior_to_xarray()
        observed, constant = self.data_to_xarray()
        if observed is not None:
            groups["observed_data"] = observed
        if constant is not None:
            groups["constant_data"] = constant
        attrs = self.attributes()
        for ds in groups.values():
            ds.attrs.update(attrs)
        import warnings

        with warnings.catch_warnings():
            # extended_posterior is not one of ArviZ's schema groups; that is intended
            warnings.filterwarnings("ignore", message=".*not.*in.*schema.*|.*supported_groups.*")
            idata = az.InferenceData(**groups)
        return idata


def to_inference_data(fit: Any, evidence: Any = None, include_extended: bool = True,
                      output_dir: str | None = None,
                      log_likelihood: str | Iterable[str] | None = "log_lik") -> Any:
    """Convert a pemc-stan fit to :class:`arviz.InferenceData`.

    Parameters
    ----------
    fit
        A PseudoExtendedFit or ContinuousTemperingFit.
    evidence
        An :class:`~pemc_stan.estimators.log_z.EvidenceEstimate` to record
        (default ``fit.log_z()`` when the fit has one).
    include_extended
        Include the ``extended_posterior`` group.
    output_dir
        Directory for the original model's generated quantities run.
    log_likelihood
        Generated quantities of pointwise log likelihoods, moved to the
        ``log_likelihood`` group (default ``"log_lik"``, when the model has it; None:
        none).

    Returns
    -------
    arviz.InferenceData
        Groups ``posterior``, ``sample_stats``, ``extended_posterior``, ``log_likelihood``,
        ``observed_data``/``constant_data`` (when the model has data); see
        the module docstring.

    Raises
    ------
    TypeError
        If ``fit`` is not a pemc-stan fit.
    RuntimeError
        If the original model's ``generate_quantities`` fails.
    """
    return InferenceDataConverter(fit, evidence=evidence, include_extended=include_extended,
                                  output_dir=output_dir,
                                  log_likelihood=log_likelihood).to_inference_data()


#: ``az.from_cmdstanpy``-style alias.
from_pemc_stan = to_inference_data

