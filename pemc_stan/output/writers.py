"""Writing a fit's results to a folder: InferenceData, weights, estimates.

:func:`save_fit` writes what ``pemc-stan sample`` leaves in its output folder,
so Python users get the same files::

    <model>.nc       ArviZ InferenceData (NetCDF)
    gq/              the original model's generated quantities on the resampled draws
    weights.csv      per draw: chain, draw and the method's temperatures and log weights
    estimates.json   method, options, weighted expectations with MCSE, log Z, diagnostics
"""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pemc_stan.output.diagnostics import Verdict

__all__ = ["SavedFit", "save_fit", "summary_table", "json_safe"]


def json_safe(value: Any) -> Any:
    """``value`` with NumPy scalars and arrays, tuples and dataclasses made JSON-ready.

    Non-finite floats become None.

    Raises
    ------
    Nothing (unknown objects become their ``repr``).
    """
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (np.floating, float)):
        v = float(value)
        return v if math.isfinite(v) else None
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return json_safe(dataclasses.asdict(value))
    return repr(value)


def summary_table(fit: Any, idata: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Weighted means with MCSE, and sd/interval/ESS/R-hat of the resampled draws.

    Returns
    -------
    (table, weighted)
        The combined table (one row per parameter element) and the fit's own
        ``summary()``.

    Raises
    ------
    Nothing beyond ArviZ's and the fit's own errors.
    """
    import arviz as az

    params = [p for p in fit.program.parameter_names if p in idata.posterior.data_vars]
    stats = az.summary(idata, var_names=params or None, kind="all", stat_focus="mean",
                       hdi_prob=0.9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the verdict is reported by the caller
        weighted = fit.summary()
    table = pd.DataFrame(index=stats.index)
    if {"mean", "mcse"} <= set(weighted.columns):
        table["mean"] = weighted["mean"].reindex(stats.index)
        table["mcse"] = weighted["mcse"].reindex(stats.index)
    for col in ("sd", "hdi_5%", "hdi_95%", "ess_bulk", "ess_tail", "r_hat"):
        if col in stats.columns:
            table[col] = stats[col]
    return table, weighted


@dataclass(frozen=True)
class SavedFit:
    """What :func:`save_fit` wrote and computed.

    Attributes
    ----------
    folder
        The output folder.
    files
        The files and folders written, relative to ``folder``.
    table
        The summary table (:func:`summary_table`).
    diagnostics
        The fit's diagnostics (without warnings issued).
    log_z
        ``{"log_z", "std_error", "method"}`` when the fit has an estimate, else None.
    verdict
        The fit's :class:`~pemc_stan.output.diagnostics.Verdict`.
    estimates
        The content of ``estimates.json``.
    """

    folder: Path
    files: tuple[str, ...]
    table: pd.DataFrame
    diagnostics: dict[str, Any]
    log_z: dict[str, Any] | None
    verdict: Verdict
    estimates: dict[str, Any]


def save_fit(fit: Any, folder: str | Path, *, name: str | None = None,
             model_label: str | None = None, data_label: str | None = None,
             sampler: dict[str, Any] | None = None) -> SavedFit:
    """Write a fit's InferenceData, weights and estimates into ``folder``.

    Parameters
    ----------
    fit
        A pemc-stan fit.
    folder
        The output folder (created if needed).
    name
        File stem of the NetCDF file (default: the model's name).
    model_label, data_label
        What to record as the model and data in ``estimates.json``.
    sampler
        The sampler settings to record (chains, iterations, seed).

    Returns
    -------
    SavedFit

    Raises
    ------
    RuntimeError
        If the original model's generate_quantities fails.
    OSError
        If the folder cannot be written.
    """
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        diagnostics = fit.diagnostics(warn=False)
    idata = fit.to_inference_data(output_dir=str(out / "gq"))
    nc = out / f"{name or fit.program.name}.nc"
    idata.to_netcdf(str(nc))
    weights_csv = out / "weights.csv"
    fit.weights_frame().to_csv(weights_csv, index=False)
    table, weighted = summary_table(fit, idata)
    verdict = fit.check()
    attrs = idata.posterior.attrs
    log_z = None
    if "pemc_log_z" in attrs:
        log_z = {"log_z": float(attrs["pemc_log_z"]),
                 "std_error": float(attrs["pemc_log_z_std_error"]),
                 "method": str(attrs["pemc_log_z_method"])}
    estimates: dict[str, Any] = {
        "method": fit.method,
        "model": model_label if model_label is not None else fit.program.name,
        "data": data_label,
        "options": json.loads(attrs["pemc_options"]),
        "sampler": dict(sampler or {}),
        "expectations": {str(n): {k: json_safe(row[k]) for k in weighted.columns}
                         for n, row in weighted.iterrows()},
        "log_z": log_z,
        "diagnostics": json_safe(diagnostics),
        "verdict": {"status": verdict.status, "checks": list(verdict.checks),
                    "reasons": [dataclasses.asdict(r) for r in verdict.reasons]},
    }
    estimates.update(json_safe(dict(fit.output_extras().settings)))
    follow = getattr(fit, "follow_up", None)
    estimates["follow_up"] = None if follow is None else json_safe(follow.as_dict())
    estimates_json = out / "estimates.json"
    estimates_json.write_text(json.dumps(estimates, indent=2) + "\n")
    files = [nc.name, weights_csv.name, estimates_json.name]
    files += [f"{d}/" for d in ("cmdstan", "gq") if (out / d).is_dir()]
    return SavedFit(out, tuple(files), table, diagnostics, log_z, verdict, estimates)
