"""The pictures of a run folder: PNG files a statistician looks at first.

:func:`write_figures` draws, from what a run folder holds (the InferenceData of
``<model>.nc``, ``estimates.json`` and the pilot's modes in ``modes.json``), these
files into ``plots/``:

``trace.png``
    Marginal (per chain) and trace of each original parameter's resampled draws,
    at most :data:`MAX_PANELS` scalar elements (shared out between the parameters).
``temperature.png``
    The inverse temperature ``beta``: its marginal and its trace per chain
    (continuous tempering), or the pseudo-samples' temperatures (pseudo-extended).
``weights.png``
    The importance weights: their distribution and how concentrated they are.
``modes.png``
    The modes the pilot's search found, over the resampled draws of the first
    :data:`MAX_PAIRS` scalar elements (a pairs grid; a histogram for one).
``log_z.png``
    The evidence estimate ``log Z`` with its error bar and the estimates it came
    from (only when the run has one).

Figures are drawn on :class:`matplotlib.figure.Figure` objects with the Agg
canvas, never through ``pyplot``'s global state, so drawing them does not touch
the backend of a session that imported pemc-stan.  A picture that cannot be
drawn is logged as a warning naming it and left out; the others are still
written.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pemc_stan.output.fit_protocol import column_name
from pemc_stan.output.plots import plot_beta, plot_weights, select_column

logger = logging.getLogger(__name__)

__all__ = ["PLOTS_DIR", "MAX_PANELS", "MAX_PAIRS", "WrittenFigure", "scalar_columns",
           "panel_columns", "log_z_estimates", "trace_figure", "temperature_figure",
           "weights_figure", "modes_figure", "log_z_figure", "write_figures"]

#: Folder of the PNG files inside a run folder.
PLOTS_DIR = "plots"
#: At most this many scalar elements get a row in ``trace.png``.
MAX_PANELS = 12
#: At most this many scalar elements in the pairs grid of ``modes.png``.
MAX_PAIRS = 4
#: At most this many modes are named on a histogram (more would overlap).
MAX_MODE_LABELS = 6
#: Resolution of the PNG files.
DPI = 100
#: At most this many points in a scatter panel (a seeded random subset).
MAX_POINTS = 2000


@dataclass(frozen=True)
class WrittenFigure:
    """A PNG file written by :func:`write_figures`.

    Attributes
    ----------
    name
        Its path relative to the run folder (``plots/trace.png``).
    path
        Its full path.
    title
        A heading for the report.
    caption
        What the picture shows and what to look for.
    """

    name: str
    path: Path
    title: str
    caption: str


def _figure_class() -> Any:
    """:class:`matplotlib.figure.Figure`, imported lazily.

    Raises
    ------
    ImportError
        Naming the ``plots`` extra when matplotlib is missing.
    """
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the run's pictures need matplotlib, which is not installed; install the plots "
            "extra: pip install \"pemc-stan[plots]\" (or pass plots=False)") from exc
    return Figure


def _new_figure(width: float, height: float) -> Any:
    figure = _figure_class()(figsize=(width, height), layout="constrained")
    return figure


# ---------------------------------------------------------------------- columns
def scalar_columns(posterior: Any, names: Sequence[str] | None = None) -> list[str]:
    """Scalar columns (``x``, ``v[2]``, ``m[1,2]``: Stan's 1-based indices) of variables.

    Parameters
    ----------
    posterior
        An xarray Dataset with dims ``(chain, draw, ...)``.
    names
        Variables to list (default: all the dataset's variables); names not in it
        are skipped.

    Returns
    -------
    list of str
        In the variables' order, each variable's elements row-major.

    Raises
    ------
    Nothing.
    """
    out: list[str] = []
    for name in (list(posterior.data_vars) if names is None else names):
        if name not in posterior.data_vars:
            continue
        shape = [posterior[name].sizes[d] for d in posterior[name].dims
                 if d not in ("chain", "draw")]
        if not shape:
            out.append(str(name))
            continue
        out += [column_name(str(name), idx) for idx in np.ndindex(*shape)]
    return out


def _base_name(column: str) -> str:
    return column.split("[", 1)[0]


def panel_columns(columns: Sequence[str], limit: int = MAX_PANELS) -> list[str]:
    """At most ``limit`` of ``columns``, shared out between the variables they belong to.

    Each variable gets its first elements in turn (round robin), so that a long
    vector declared first does not crowd out the scalars after it; the result
    keeps the order of ``columns``.

    Raises
    ------
    Nothing.
    """
    groups: dict[str, list[str]] = {}
    for c in columns:
        groups.setdefault(_base_name(c), []).append(c)
    chosen: set[str] = set()
    depth = 0
    while len(chosen) < min(limit, len(columns)):
        for members in groups.values():
            if depth < len(members) and len(chosen) < limit:
                chosen.add(members[depth])
        depth += 1
    return [c for c in columns if c in chosen]


def _values(ds: Any, column: str) -> NDArray[np.float64]:
    """(chains, draws) values of one scalar column."""
    return np.asarray(select_column(ds, column), dtype=float)


# ---------------------------------------------------------------------- figures
def trace_figure(posterior: Any, columns: Sequence[str], total: int | None = None,
                 means: Mapping[str, float] | None = None,
                 chain_labels: Sequence[str] | None = None) -> Any:
    """Marginal (left) and trace (right) per chain of each column's draws.

    Parameters
    ----------
    posterior
        The group whose chains are drawn: the posterior (resampled draws), or a mode
        split's own chains (``pemc_trace_group``).
    chain_labels
        A label per chain (default ``chain 1``, ...): a split's name each chain's group.
    columns
        Scalar columns, one row each.
    total
        How many scalar elements the parameters have (named in the title when more
        than ``columns``).
    means
        Weighted means to mark on the marginals (``estimates.json``'s expectations).

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        If ``columns`` is empty.
    KeyError
        If a column is not in ``posterior``.
    """
    if not columns:
        raise ValueError("no parameter to draw a trace of")
    n = len(columns)
    fig = _new_figure(10.0, 1.7 * n + 0.7)
    axes = fig.subplots(n, 2, squeeze=False)
    for row, column in enumerate(columns):
        values = _values(posterior, column)
        hist, trace = axes[row]
        finite = values[np.isfinite(values)]
        lo, hi = (float(np.min(finite)), float(np.max(finite))) if finite.size else (0.0, 1.0)
        if hi <= lo:
            lo, hi = lo - 0.5, hi + 0.5
        for c in range(values.shape[0]):
            chain = values[c][np.isfinite(values[c])]
            hist.hist(chain, bins=40, range=(lo, hi), density=True, histtype="step",
                      color=f"C{c % 10}", lw=1.0)
            trace.plot(np.arange(values.shape[1]), values[c], color=f"C{c % 10}", lw=0.5,
                       alpha=0.8, label=(chain_labels[c] if chain_labels is not None
                                         and c < len(chain_labels) else f"chain {c + 1}"))
        if means is not None and math.isfinite(means.get(column, math.nan)):
            hist.axvline(float(means[column]), color="k", ls="--", lw=1.0,
                         label="weighted mean")
        hist.set_ylabel(column)
        hist.set_yticks([])
        trace.set_ylabel(column)
        if row == 0:
            hist.set_title("marginal per chain" + ("" if chain_labels is not None
                                                   else " (resampled draws)"))
            trace.set_title("trace per chain")
            if values.shape[0] > 1:
                trace.legend(loc="upper right", fontsize="x-small", ncols=min(values.shape[0], 4))
        if row == n - 1:
            hist.set_xlabel("value")
            trace.set_xlabel("draw")
    shown = f"{n} of {total} scalar elements" if total is not None and total > n else ""
    if shown:
        fig.suptitle(f"original parameters: the first {shown}", fontsize="medium")
    return fig


def temperature_figure(idata: Any) -> Any:
    """The inverse temperature's marginal and trace (:func:`~pemc_stan.output.plots.plot_beta`).

    Raises
    ------
    KeyError
        If the run recorded no ``beta``.
    """
    if "sample_stats" not in idata.groups() or "beta" not in idata.sample_stats:
        raise KeyError("the InferenceData records no inverse temperature beta")
    fig = _new_figure(10.0, 3.6)
    plot_beta(idata, axes=fig.subplots(1, 2))
    return fig


def weights_figure(idata: Any) -> Any:
    """The importance weights (:func:`~pemc_stan.output.plots.plot_weights`).

    Raises
    ------
    KeyError
        If the run recorded no weights.
    """
    if "sample_stats" not in idata.groups() or "weight" not in idata.sample_stats:
        raise KeyError("the InferenceData records no importance weights")
    fig = _new_figure(10.0, 3.6)
    plot_weights(idata, axes=fig.subplots(1, 2))
    return fig


def _mode_positions(modes: Mapping[str, Any] | None, column: str) -> NDArray[np.float64] | None:
    """The modes' centres along ``column`` (None when the modes do not name it)."""
    if not modes:
        return None
    names = list(modes.get("columns") or [])
    if column not in names:
        return None
    centres = np.asarray(modes.get("centres") or [], dtype=float)
    if centres.ndim != 2 or centres.shape[1] != len(names):
        return None
    return np.asarray(centres[:, names.index(column)], dtype=float)


def _search_title(search: Mapping[str, Any] | None, modes: Mapping[str, Any] | None) -> str:
    found = len((modes or {}).get("centres") or [])
    if search:
        radius = search.get("search_radius")
        within = f"{radius:g}" if isinstance(radius, (int, float)) else "?"
        return (f"{found or search.get('major_modes_found', '?')} mode(s) found by the "
                f"pilot's {search.get('search_paths', '?')} Pathfinder paths\n(started within "
                f"radius {within}), over the resampled draws")
    if found:
        return f"{found} mode(s) found by the pilot over the resampled draws"
    return "resampled draws (no search for modes recorded)"


def modes_figure(posterior: Any, columns: Sequence[str], modes: Mapping[str, Any] | None,
                 search: Mapping[str, Any] | None = None, seed: int = 0) -> Any:
    """The pilot's modes over the resampled draws of the first :data:`MAX_PAIRS` columns.

    One column: a histogram with the modes as vertical lines; two or more: a grid
    with histograms on the diagonal and scatter plots below it, the modes as
    crosses whose size grows with their share of the mass found.

    Parameters
    ----------
    posterior
        The posterior group (resampled draws).
    columns
        Scalar columns (the first :data:`MAX_PAIRS` are drawn).
    modes
        ``{"columns", "centres" (K x C), "shares"}`` (``modes.json``), or None.
    search
        The search's record (``pemc_search``) for the title.
    seed
        Seed of the subset of points drawn.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        If ``columns`` is empty.
    KeyError
        If a column is not in ``posterior``.
    """
    cols = list(columns[:MAX_PAIRS])
    if not cols:
        raise ValueError("no parameter to draw the modes over")
    shares = np.asarray((modes or {}).get("shares") or [], dtype=float)
    values = [_values(posterior, c).reshape(-1) for c in cols]
    n = len(cols)
    rng = np.random.default_rng(seed)
    keep = (rng.choice(values[0].size, MAX_POINTS, replace=False)
            if values[0].size > MAX_POINTS else np.arange(values[0].size))
    size = 4.2 if n == 1 else 2.6
    fig = _new_figure(max(6.0, size * n), max(3.8, size * n))
    axes = fig.subplots(n, n, squeeze=False)

    def marker_sizes(k: int) -> NDArray[np.float64]:
        if shares.size != k:
            return np.full(k, 80.0)
        return np.asarray(40.0 + 260.0 * shares / max(float(np.max(shares)), 1e-300))

    for i in range(n):
        for j in range(n):
            ax = axes[i][j]
            if j > i:
                ax.set_axis_off()
                continue
            if i == j:
                x = values[i][np.isfinite(values[i])]
                ax.hist(x, bins=50, density=True, color="C0", alpha=0.6)
                pos = _mode_positions(modes, cols[i])
                if pos is not None:
                    # named on a lone histogram with few modes; else the scatter numbers them
                    named = n == 1 and pos.size <= MAX_MODE_LABELS
                    for k, p in enumerate(pos):
                        ax.axvline(p, color="C3", lw=1.0 if pos.size > MAX_MODE_LABELS else 1.5,
                                   ls="--")
                        if not named:
                            continue
                        label = f"mode {k + 1}" + (f" ({100 * shares[k]:.0f}%)"
                                                   if shares.size == pos.size else "")
                        ax.annotate(label, (p, 1.0), xycoords=("data", "axes fraction"),
                                    xytext=(2, -10 - 10 * k), textcoords="offset points",
                                    color="C3", fontsize="x-small")
                ax.set_yticks([])
            else:
                ax.scatter(values[j][keep], values[i][keep], s=3, alpha=0.3, color="C0",
                           linewidths=0)
                px, py = _mode_positions(modes, cols[j]), _mode_positions(modes, cols[i])
                if px is not None and py is not None:
                    ax.scatter(px, py, s=marker_sizes(px.size), marker="X", color="C3",
                               edgecolors="k", linewidths=0.6, zorder=3)
                    for k in range(px.size):
                        ax.annotate(str(k + 1), (px[k], py[k]), xytext=(4, 4),
                                    textcoords="offset points", color="C3",
                                    fontsize="x-small")
            if i == n - 1:
                ax.set_xlabel(cols[j])
            if j == 0 and i != j:
                ax.set_ylabel(cols[i])
            elif j == 0 and n == 1:
                ax.set_ylabel("density")
    fig.suptitle(_search_title(search, modes), fontsize="medium")
    return fig


def log_z_estimates(estimates: Mapping[str, Any]) -> list[tuple[str, float, float]]:
    """``(label, log Z, standard error)`` of every evidence estimate ``estimates.json`` holds.

    The run's estimate first (``log_z``), then the diagnostics' series of
    estimates with standard errors (``<key>`` with ``<key>_se``, e.g. the
    bootstrap rounds of continuous tempering), one row per element.  A missing
    standard error is NaN.

    Raises
    ------
    Nothing (entries that are not numbers are skipped).
    """
    rows: list[tuple[str, float, float]] = []
    final = estimates.get("log_z")
    if isinstance(final, Mapping) and math.isfinite(_number(final.get("log_z"))):
        rows.append((f"final ({final.get('method', '?')})", _number(final.get("log_z")),
                     _number(final.get("std_error"))))
    diagnostics = estimates.get("diagnostics") or {}
    for key, value in diagnostics.items():
        if "log_z" not in str(key) or str(key).endswith("_se"):
            continue
        se = diagnostics.get(f"{key}_se")
        if isinstance(value, list) and isinstance(se, list) and len(se) == len(value):
            rows += [(f"{str(key).replace('_', ' ')} round {k}", _number(v), _number(s))
                     for k, (v, s) in enumerate(zip(value, se, strict=True))
                     if math.isfinite(_number(v))]
        elif math.isfinite(_number(value)) and se is not None:
            row = (str(key).replace("_", " "), _number(value), _number(se))
            if not rows or row[1:] != rows[0][1:]:  # not the final estimate again
                rows.append(row)
    return rows


def _number(value: Any) -> float:
    """``value`` as a finite float, else NaN."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    return float(value) if math.isfinite(float(value)) else math.nan


def log_z_figure(estimates: Mapping[str, Any]) -> Any:
    """The evidence estimates with error bars of two standard errors.

    Raises
    ------
    ValueError
        If ``estimates`` holds no evidence estimate.
    """
    rows = log_z_estimates(estimates)
    if not rows:
        raise ValueError("the run has no evidence estimate (log Z)")
    fig = _new_figure(7.0, 1.0 + 0.45 * len(rows))
    ax = fig.subplots()
    ys = np.arange(len(rows))[::-1]
    for y, (label, value, se) in zip(ys, rows, strict=True):
        colour = "C3" if label.startswith("final") else "C0"
        ax.errorbar(value, y, xerr=2 * se if math.isfinite(se) else None, fmt="o",
                    color=colour, capsize=4)
    ax.set_yticks(ys, [r[0] for r in rows], fontsize="small")
    ax.set_xlabel("log Z (error bars: +/- 2 standard errors)")
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.grid(axis="x", alpha=0.3)
    return fig


# ---------------------------------------------------------------------- files
#: The trace's caption for a mode split, whose chains are labelled with their groups.
_SPLIT_TRACE = ("Original parameters",
                "Each group's own NUTS chains of the mode split, labelled with their group "
                "of modes: the marginal per chain (left; the dashed line is the weighted "
                "mean over the groups) and the trace per chain (right). Chains of one group "
                "that disagree, or traces that stay in one region for long stretches, mean "
                "the draws have not mixed.")
_CAPTIONS = {
    "trace": ("Original parameters",
              "Resampled draws of each original parameter: the marginal per chain (left; "
              "the dashed line is the weighted mean) and the trace per chain (right). "
              "Chains that disagree, or traces that stay in one region for long "
              "stretches, mean the draws have not mixed."),
    "temperature": ("Inverse temperature beta",
                    "Continuous tempering: beta should move often between 0 (the base) and "
                    "1 (the target) in every chain, with a marginal near uniform. "
                    "Pseudo-extended: the temperatures of the pseudo-samples, whose mean "
                    "per draw is traced."),
    "weights": ("Importance weights",
                "The distribution of the normalised weights and how concentrated they "
                "are: a few draws carrying most of the weight mean few effective draws."),
    "modes": ("Modes found by the pilot",
              "The modes the pilot's Pathfinder search found (crosses and dashed lines, "
              "sized or labelled by their share of the mass found) over the resampled "
              "draws. A mode without draws around it was missed by the sampler."),
    "log_z": ("Evidence log Z",
              "The evidence estimate with error bars of two standard errors, and the "
              "estimates it was refined from."),
}


def write_figures(folder: str | Path, idata: Any, *, columns: Sequence[str] | None = None,
                  estimates: Mapping[str, Any] | None = None,
                  modes: Mapping[str, Any] | None = None) -> list[WrittenFigure]:
    """Draw the run's pictures into ``folder/plots/`` (replacing what was there).

    Parameters
    ----------
    folder
        The run folder.
    idata
        The run's InferenceData.
    columns
        The original parameters' scalar columns (default: every posterior variable's).
    estimates
        The content of ``estimates.json`` (weighted means, log Z).
    modes
        The pilot's modes (``modes.json``), or None.

    Returns
    -------
    list of WrittenFigure
        The pictures drawn, in the report's order; a picture that failed is
        logged as a warning naming it and left out.

    Raises
    ------
    ImportError
        If matplotlib is not installed.
    OSError
        If ``folder/plots`` cannot be written.
    """
    _figure_class()
    out = Path(folder) / PLOTS_DIR
    fresh = Path(folder) / f".{PLOTS_DIR}-new"
    if fresh.exists():
        shutil.rmtree(fresh)
    fresh.mkdir(parents=True)
    estimates = estimates or {}
    posterior = idata.posterior
    if columns is None:
        columns = scalar_columns(posterior)
    panels = panel_columns(columns)
    expectations = estimates.get("expectations") or {}
    means = {str(c): _number(v.get("mean")) for c, v in expectations.items()
             if isinstance(v, Mapping)}
    search = _search_record(posterior.attrs)
    traced, labels = _traced_chains(idata)
    makers: list[tuple[str, Callable[[], Any]]] = [
        ("trace", lambda: trace_figure(traced, panels, len(columns), means, labels))]
    if "sample_stats" in idata.groups() and "beta" in idata.sample_stats:
        # a run without a temperature (a mode split) has no temperature picture
        makers.append(("temperature", lambda: temperature_figure(idata)))
    makers += [("weights", lambda: weights_figure(idata)),
               ("modes", lambda: modes_figure(posterior, panels, modes, search))]
    if log_z_estimates(estimates):
        makers.append(("log_z", lambda: log_z_figure(estimates)))
    written: list[WrittenFigure] = []
    captions = {**_CAPTIONS, **({"trace": _SPLIT_TRACE} if labels is not None else {})}
    try:
        _draw_all(makers, fresh, out, written, captions)
    finally:
        if fresh.exists():  # left behind only when interrupted
            shutil.rmtree(fresh, ignore_errors=True)
    return written


def _traced_chains(idata: Any) -> tuple[Any, list[str] | None]:
    """The group whose chains the trace shows (``pemc_trace_group``: a mode split's own
    chains, each labelled with its group of modes) and the chains' labels."""
    posterior = idata.posterior
    name = str(posterior.attrs.get("pemc_trace_group", "posterior"))
    if name == "posterior" or name not in idata.groups():
        return posterior, None
    stats = idata.sample_stats if "sample_stats" in idata.groups() else None
    if stats is None or "mode_group" not in stats:
        return idata[name], None
    groups = np.asarray(stats["mode_group"].values)[:, 0]
    return idata[name], [f"chain {c + 1} (group {int(g) + 1})" for c, g in enumerate(groups)]


def _draw_all(makers: Sequence[tuple[str, Callable[[], Any]]], fresh: Path, out: Path,
              written: list[WrittenFigure],
              captions: Mapping[str, tuple[str, str]] = _CAPTIONS) -> None:
    """Draw each picture into ``fresh`` (titled and captioned as ``captions`` say), then
    put ``fresh`` in the place of ``out``."""
    for key, make in makers:
        try:
            fig = make()
            fig.savefig(fresh / f"{key}.png", dpi=DPI, format="png")
        except Exception as exc:  # a picture must never cost the run
            logger.warning("the %s picture (%s/%s.png) was not drawn: %s: %s", key, PLOTS_DIR,
                           key, type(exc).__name__, exc)
            continue
        title, caption = captions[key]
        written.append(WrittenFigure(f"{PLOTS_DIR}/{key}.png", out / f"{key}.png", title,
                                     caption))
    if out.is_dir() and not out.is_symlink():
        shutil.rmtree(out)
    elif out.exists() or out.is_symlink():
        out.unlink()
    fresh.rename(out)


def _search_record(attrs: Mapping[str, Any]) -> dict[str, Any] | None:
    """The pilot's search (``pemc_search`` attribute, JSON), or None."""
    raw = attrs.get("pemc_search")
    if not raw:
        return None
    try:
        value = json.loads(str(raw))
    except ValueError:
        return None
    return value if isinstance(value, dict) else None

