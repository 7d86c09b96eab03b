"""Writing a fit's results to a folder: InferenceData, estimates, the run's sources.

:func:`save_fit` writes what ``pemc-stan sample`` leaves in its output folder,
so Python users get the same files::

    <model>.nc       ArviZ InferenceData (NetCDF), with the original model's transformed
                     parameters and generated quantities on the resampled draws, and
                     per draw the method's temperatures and log weights (sample_stats)
    estimates.json   method, options, weighted expectations with MCSE, log Z, diagnostics
    summary.csv      the summary table (:func:`summary_table`)
    stan/            the user's program and the generated one
    modes.json       the modes the pilot found (when it searched)
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from pemc_stan.output.cmdstan_files import arrange_runs, earlier_runs
from pemc_stan.output.diagnostics import Verdict
from pemc_stan.output.fit_protocol import fit_seed, judged_run
from pemc_stan.output.json_values import json_safe
from pemc_stan.output.run_record import write_run_sources

__all__ = ["SavedFit", "save_fit", "summary_table", "stan_label"]


def stan_label(label: str) -> str:
    """An element's label as CmdStan writes it: ArviZ's ``L[2, 1]`` -> ``L[2,1]``.

    The one spelling of every table pemc-stan writes (the summary table,
    ``estimates.json``, ``fit.summary()``), so one element's numbers meet in one row.

    Raises
    ------
    Nothing.
    """
    head, bracket, rest = str(label).partition("[")
    if not bracket:
        return str(label)
    return head + "[" + ",".join(part.strip() for part in rest.rstrip("]").split(",")) + "]"


def summary_table(fit: Any, idata: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Weighted means with MCSE, the draws' sd and interval, and the verdict's R-hat/ESS.

    One row per parameter element, labelled and ordered as CmdStan names them
    (``L[2,1]``; see :func:`stan_label`): ``mean``, ``mcse`` and ``ess_mean`` (the
    ESS behind the MCSE) of the fit's weighted ``summary()``; ``sd`` and the 90%
    HDI of the resampled draws in ``idata``; ``ess_bulk``, ``ess_tail`` and
    ``r_hat`` from ``fit.convergence()``, the very numbers the verdict's R-hat
    and ESS checks judge.  Then the transformed parameters and generated quantities,
    as ``summary()`` gives them.

    Returns
    -------
    (table, weighted)
        The combined table and the fit's own ``summary()``.

    Raises
    ------
    Nothing beyond ArviZ's and the fit's own errors.
    """
    import arviz as az

    summed = list(fit.program.marginalised)  # summed out of the program, drawn back
    params = [p for p in (*fit.program.parameter_names, *summed)
              if p in idata.posterior.data_vars]
    stats = pd.DataFrame(az.summary(idata, var_names=params or None, kind="stats",
                                    hdi_prob=0.9))
    stats.index = [stan_label(str(i)) for i in stats.index]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the verdict is reported by the caller
        weighted = fit.summary()
    mixing = fit.convergence()
    rows = [*fit.parameter_columns(), *summed]
    table = pd.DataFrame(index=pd.Index(rows))
    for col, source in (("mean", "mean"), ("mcse", "mcse"), ("ess_mean", "ess"),
                        ("khat", "khat")):
        if source in weighted.columns:
            table[col] = weighted[source].reindex(rows)
    for col in ("sd", "hdi_5%", "hdi_95%"):
        if col in stats.columns:
            table[col] = stats[col].reindex(rows)
    for col in ("ess_bulk", "ess_tail", "r_hat"):
        table[col] = mixing[col].reindex(rows)
    quantities = [r for r in weighted.index if r not in set(rows)]  # TPs and GQs
    if quantities:
        extra = weighted.loc[quantities].rename(columns={"ess": "ess_mean"})
        table = pd.concat([table, extra[[c for c in table.columns if c in extra.columns]]])
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
        ``{"log_z", "std_error", "method"}`` when the fit has an estimate;
        ``{"log_z": None, "std_error": None, "undefined": why}`` when the evidence of
        the model is undefined (a flat, improper prior; ``why`` is the message of the
        :class:`~pemc_stan.errors.ImproperPriorError` that ``fit.log_z()`` and
        :func:`pemc_stan.evidence` raise); None when the method has no estimate.
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


def _with_seed(sampler: dict[str, Any], fit: Any) -> dict[str, Any]:
    if sampler.get("seed") is None:
        sampler["seed"] = fit_seed(fit)
    return sampler


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
        The sampler settings to record (chains, iterations, seed); without a seed,
        the fit's (``fit.run_seed``, drawn when none was given) is recorded.

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
    arrange_runs(out, fit)  # the judged run at cmdstan/, the earlier ones in sub-folders
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        diagnostics = fit.diagnostics(warn=False)
    with tempfile.TemporaryDirectory(dir=out) as gq:  # the posterior holds what it writes
        idata = fit.to_inference_data(output_dir=gq)
    nc = out / f"{name or fit.program.name}.nc"
    idata.to_netcdf(str(nc))
    table, weighted = summary_table(fit, idata)
    verdict = fit.check()
    attrs = idata.posterior.attrs
    log_z: dict[str, Any] | None = None
    if "pemc_log_z" in attrs:
        log_z = {"log_z": float(attrs["pemc_log_z"]),
                 "std_error": float(attrs["pemc_log_z_std_error"]),
                 "method": str(attrs["pemc_log_z_method"])}
    elif "pemc_log_z_undefined" in attrs:  # an improper prior: why, instead of a number
        log_z = {"log_z": None, "std_error": None,
                 "undefined": str(attrs["pemc_log_z_undefined"])}
    estimates: dict[str, Any] = {
        "method": fit.method,
        "title": fit.title(),
        "model": model_label if model_label is not None else fit.program.name,
        "data": data_label,
        "options": json.loads(attrs["pemc_options"]),
        "sampler": _with_seed({**dict(sampler or {}), **judged_run(fit, out)}, fit),
        "requested": dict(sampler or {}),
        "earlier_runs": earlier_runs(out, judged_run(fit, out).get("csv_folder")),
        "expectations": {str(n): {k: json_safe(row[k]) for k in weighted.columns}
                         for n, row in weighted.iterrows()},
        "log_z": log_z,
        "marginalised": list(fit.program.marginalised),
        "diagnostics": json_safe(diagnostics),
        "verdict": {"status": verdict.status, "checks": list(verdict.checks),
                    "reasons": [dataclasses.asdict(r) for r in verdict.reasons],
                    "notes": [dataclasses.asdict(r) for r in verdict.notes]},
    }
    estimates.update(json_safe(dict(fit.output_extras().settings)))
    follow = fit.follow_up
    estimates["follow_up"] = None if follow is None else json_safe(follow.as_dict())
    # wall seconds depend on the machine: the only field of this file that a rerun changes
    estimates["cost"] = None if follow is None else json_safe(follow.cost())
    estimates_json = out / "estimates.json"
    estimates_json.write_text(json.dumps(estimates, indent=2) + "\n")
    files = [nc.name, estimates_json.name]
    files += ["cmdstan/"] if (out / "cmdstan").is_dir() else []

    files += write_run_sources(fit, out, name=name, table=table)
    return SavedFit(out, tuple(files), table, diagnostics, log_z, verdict, estimates)
