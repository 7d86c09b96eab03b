"""What a run folder keeps for its report, and reading it back.

``pemc-stan sample`` writes, beside the InferenceData and ``estimates.json``, the
user's and the generated Stan programs, the pilot's modes as parameter values and the
summary table (:func:`write_run_sources`); :func:`read_run` reads a finished run
folder back into a :class:`RunRecord`, or says with a :class:`RunFolderError` why it
cannot.  :mod:`pemc_stan.output.report` builds ``report.html`` from that record alone.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pemc_stan.errors import PemcStanError
from pemc_stan.output.figures import scalar_columns
from pemc_stan.output.fit_protocol import RunFit, by_column
from pemc_stan.output.json_values import json_safe

logger = logging.getLogger(__name__)

__all__ = ["SOURCES_DIR", "MODES_NAME", "SUMMARY_NAME", "RunFolderError", "RunRecord",
           "mode_centres", "write_run_sources", "read_run"]

#: Folder of the user's and the generated Stan programs inside the run folder.
SOURCES_DIR = "stan"
#: The pilot's modes inside the run folder.
MODES_NAME = "modes.json"
#: The summary table (as printed by ``pemc-stan sample``) inside the run folder.
SUMMARY_NAME = "summary.csv"


class RunFolderError(PemcStanError):
    """A folder is not a pemc-stan run folder (or lacks what a report needs).

    Attributes
    ----------
    remedy
        What to do, one line.
    path
        The folder or file concerned.
    """

    def __init__(self, message: str, remedy: str, path: Path) -> None:
        super().__init__(message)
        self.remedy = remedy
        self.path = path


# ---------------------------------------------------------------------- writing sources
def mode_centres(fit: RunFit) -> dict[str, Any] | None:
    """The modes the fit's pilot found, as parameter values: ``{"columns", "centres",
    "shares", "search"}`` (None when the fit has no search or no centres).

    ``centres`` is (modes x columns): the search's centres in base coordinates mapped
    back to the parameters' constrained space (raw parameter columns when the
    parameters have no base coordinates).

    Raises
    ------
    Nothing (a map that fails is logged and gives None).
    """
    search = fit.search
    raw = None if search is None else search.centres
    if raw is None:
        return None
    centres = np.atleast_2d(np.asarray(raw, dtype=float))
    coords = fit.result.coordinates
    columns: list[str] = []
    values: list[Any] = []
    try:
        if coords is not None and coords.blocks and centres.shape[1] == coords.dim(fit.data):
            by_col = by_column(coords.inverse(centres, fit.data), lead=1)  # (modes,) each
            columns, values = list(by_col), list(by_col.values())
        else:
            params = list(fit.parameter_columns())
            if centres.shape[1] < len(params):
                return None
            columns = params
            values = [centres[:, i] for i in range(len(params))]
    except Exception as exc:  # the coordinates of an exotic type: no overlay, no failure
        logger.info("the pilot's modes were not mapped to parameter values (%s)", exc)
        return None
    shares = [float(s) for s in search.major_shares]
    table = np.stack(values, axis=1) if values else np.zeros((centres.shape[0], 0))
    return {"columns": columns, "centres": table.tolist(),
            "shares": shares if len(shares) == table.shape[0] else [],
            "search": search.as_dict()}


def write_run_sources(fit: Any, folder: str | Path, name: str | None = None,
                      table: pd.DataFrame | None = None) -> list[str]:
    """Write what a report needs besides the InferenceData and ``estimates.json``.

    ``stan/<name>.stan`` (the user's program), ``stan/<name>_<method>.stan`` (the
    generated program), ``stan/<name>_marginalised.stan`` (the program sampled, when a
    parameter was summed out: CmdStan's messages name its lines), ``modes.json``
    (:func:`mode_centres`, when the fit has them) and ``summary.csv`` (``table``, when
    given).

    Parameters
    ----------
    fit
        A pemc-stan fit.
    folder
        The run folder.
    name
        File stem (default: the model's name).
    table
        The summary table (:func:`~pemc_stan.output.writers.summary_table`), one row
        per parameter element.

    Returns
    -------
    list of str
        The names written, relative to ``folder`` (folders with a trailing ``/``).

    Raises
    ------
    OSError
        If the folder cannot be written.
    """
    out = Path(folder)
    stem = name or fit.program.name
    sources = out / SOURCES_DIR
    sources.mkdir(parents=True, exist_ok=True)
    result = fit.result
    try:
        short = result.require_method().short
    except ValueError:
        short = str(fit.method)
    program = result.program
    (sources / f"{stem}.stan").write_text(_with_newline((program.original or program).text))
    if program.original is not None:  # the program sampled, with a parameter summed out
        (sources / f"{stem}_marginalised.stan").write_text(_with_newline(program.text))
    (sources / f"{stem}_{short}.stan").write_text(_with_newline(str(result.stan_code)))
    written = [f"{SOURCES_DIR}/"]
    modes = mode_centres(fit)
    if modes is not None:

        (out / MODES_NAME).write_text(json.dumps(json_safe(modes), indent=1) + "\n")
        written.append(MODES_NAME)
    if table is not None:
        table.to_csv(out / SUMMARY_NAME, index_label="parameter")
        written.append(SUMMARY_NAME)
    return written


def _with_newline(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


# ---------------------------------------------------------------------- reading a run
@dataclass(frozen=True)
class RunRecord:
    """What a run folder holds, read by :func:`read_run`.

    Attributes
    ----------
    folder
        The run folder.
    netcdf
        The InferenceData file's name.
    idata
        The InferenceData (loaded into memory).
    estimates
        The content of ``estimates.json``.
    user_program, generated_program
        ``(file name, text)`` of the user's and the generated program, or None
        when the folder does not hold them (a run of an older pemc-stan).
    modes
        The content of ``modes.json``, or None.
    summary
        ``summary.csv`` (index: the parameter elements), or None.
    """

    folder: Path
    netcdf: str
    idata: Any
    estimates: dict[str, Any]
    user_program: tuple[str, str] | None
    generated_program: tuple[str, str] | None
    modes: dict[str, Any] | None
    summary: pd.DataFrame | None = None

    @property
    def model_stem(self) -> str:
        """The model's file stem (the NetCDF file's)."""
        return Path(self.netcdf).stem

    def parameter_columns(self) -> list[str]:
        """The original parameters' scalar columns (the weighted expectations' names,
        else every posterior variable's elements)."""
        names = [str(c) for c in (self.estimates.get("expectations") or {})]
        posterior = self.idata.posterior
        known = [c for c in names if c.split("[", 1)[0] in posterior.data_vars]
        return known or scalar_columns(posterior)

    def parameter_names(self) -> list[str]:
        """The original parameters' names, in order."""
        out: list[str] = []
        for c in self.parameter_columns():
            base = c.split("[", 1)[0]
            if base not in out:
                out.append(base)
        return out


def _manifest_files(folder: Path) -> list[str]:
    from pemc_stan.output.folder import MANIFEST_NAME

    try:
        files = json.loads((folder / MANIFEST_NAME).read_text()).get("files", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [str(f) for f in files]


def _find_netcdf(folder: Path) -> Path:
    listed = [folder / f for f in _manifest_files(folder) if f.endswith(".nc")]
    candidates = [p for p in listed if p.is_file()] or sorted(folder.glob("*.nc"))
    if not candidates:
        raise RunFolderError(f"{folder} holds no InferenceData file (<model>.nc): it is not "
                             "the output folder of a finished 'pemc-stan sample' run",
                             "pass the output folder of a finished run", folder)
    if len(candidates) > 1:
        candidates.sort(key=lambda p: p.stat().st_mtime, reverse=True)
        logger.warning("%s holds %d InferenceData files; reporting the newest, %s", folder,
                       len(candidates), candidates[0].name)
    return candidates[0]


def _load_idata(path: Path) -> Any:
    import arviz as az

    try:
        with az.rc_context({"data.load": "eager"}):
            idata = az.from_netcdf(str(path))
    except Exception as exc:
        raise RunFolderError(f"{path} cannot be read as InferenceData: {exc}",
                             "sample again into this folder, replacing it (overwrite=True)",
                             path) from exc
    return idata


def _read_sources(folder: Path, stem: str) -> tuple[tuple[str, str] | None,
                                                    tuple[str, str] | None]:
    sources = folder / SOURCES_DIR
    user = sources / f"{stem}.stan"
    generated = sorted(p for p in sources.glob(f"{stem}_*.stan")
                       if p.name != f"{stem}_marginalised.stan") if sources.is_dir() else []
    user_program = (f"{SOURCES_DIR}/{user.name}", user.read_text()) if user.is_file() else None
    generated_program = ((f"{SOURCES_DIR}/{generated[0].name}", generated[0].read_text())
                         if generated else None)
    return user_program, generated_program


def read_run(folder: str | Path) -> RunRecord:
    """Read what a report needs from a run folder.

    Raises
    ------
    RunFolderError
        If the folder does not exist, or lacks ``estimates.json`` or the
        InferenceData, or these cannot be read.
    """
    path = Path(folder).expanduser()
    if not path.is_dir():
        raise RunFolderError(f"the run folder {path} does not exist" if not path.exists()
                             else f"{path} is a file, not a run folder",
                             "pass the output folder of a finished run", path)
    estimates_path = path / "estimates.json"
    if not estimates_path.is_file():
        partial = " (a failed or interrupted run left its output in partial-run/)" if (
            path / "partial-run" / "estimates.json").is_file() else ""
        raise RunFolderError(f"{path} holds no estimates.json: it is not the output folder "
                             f"of a finished 'pemc-stan sample' run{partial}",
                             "pass the output folder of a finished run", path)
    try:
        estimates = json.loads(estimates_path.read_text())
    except (OSError, ValueError) as exc:
        raise RunFolderError(f"{estimates_path} cannot be read: {exc}",
                             "sample again into this folder, replacing it (overwrite=True)",
                             estimates_path) from exc
    if not isinstance(estimates, dict):
        raise RunFolderError(f"{estimates_path} does not hold a JSON object",
                             "sample again into this folder, replacing it (overwrite=True)",
                             estimates_path)
    nc = _find_netcdf(path)
    idata = _load_idata(nc)
    user, generated = _read_sources(path, nc.stem)
    modes = None
    modes_path = path / MODES_NAME
    if modes_path.is_file():
        try:
            loaded = json.loads(modes_path.read_text())
            modes = loaded if isinstance(loaded, dict) else None
        except (OSError, ValueError) as exc:
            logger.warning("%s cannot be read (%s); the report shows no modes", modes_path, exc)
    summary = None
    summary_path = path / SUMMARY_NAME
    if summary_path.is_file():
        try:
            summary = pd.read_csv(summary_path, index_col=0)
        except (OSError, ValueError) as exc:
            logger.warning("%s cannot be read (%s); the report recomputes the summary",
                           summary_path, exc)
    return RunRecord(path, nc.name, idata, estimates, user, generated, modes, summary)
