"""Plots of pseudo-extended and continuously tempered fits (matplotlib, optional).

Install with ``pip install "pemc-stan[plots]"``.  Every function takes a fit
(PseudoExtendedFit / ContinuousTemperingFit) or its
:func:`~pemc_stan.output.inference_data.to_inference_data` result, draws on given
axes or on a new figure, and returns the matplotlib axes.

* :func:`plot_beta` -- the marginal of the inverse temperature ``beta`` (with
  the uniform density a well-tuned continuous-tempering run approaches when
  ``zeta = Z``) and its trace per chain;
* :func:`plot_weights` -- the distribution of the normalised importance
  weights and, for pseudo-extended fits, of the per-draw weight ESS;
* :func:`plot_extended_draws` -- the extended draws in a 2-D view (a parameter
  against ``beta``, as in figure 1c of Graham & Storkey 2017, or two
  parameters), each point sized by its weight;
* :func:`select_column` -- the values of one column (``"mu[2]"``) of a group.

:mod:`pemc_stan.output.figures` draws these (and more) into a run folder's
``plots/`` for ``report.html``.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import numpy as np
from numpy.typing import NDArray

logger = logging.getLogger(__name__)

__all__ = ["plot_beta", "plot_weights", "plot_extended_draws", "select_column"]


def _pyplot() -> Any:
    """Import matplotlib.pyplot lazily.

    Raises
    ------
    ImportError
        Naming the ``plots`` extra when matplotlib is missing.
    """
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "pemc_stan.output.plots needs matplotlib, which is not installed; install the plots "
            "extra: pip install \"pemc-stan[plots]\" (or pip install matplotlib)") from exc
    return plt


def _idata(fit_or_idata: Any) -> Any:
    """The InferenceData of a fit (converted without the posterior's GQ run when possible)."""
    if hasattr(fit_or_idata, "groups") and hasattr(fit_or_idata, "sample_stats"):
        return fit_or_idata
    if hasattr(fit_or_idata, "to_inference_data"):
        return fit_or_idata.to_inference_data()
    raise TypeError(f"expected a pemc-stan fit or its InferenceData, got "
                    f"{type(fit_or_idata).__name__}")


def _particle_dims(idata: Any) -> tuple[str, ...]:
    """Dims of the weights beyond (chain, draw): several weighted particles per draw."""
    return tuple(d for d in idata.sample_stats["weight"].dims if d not in ("chain", "draw"))


def _axes(ax: Any, n: int = 1, figsize: tuple[float, float] = (6.0, 4.0)) -> Any:
    plt = _pyplot()
    if ax is not None:
        return ax
    _, axes = plt.subplots(1, n, figsize=figsize, squeeze=False)
    return axes[0] if n > 1 else axes[0][0]


def _normalised_weights(idata: Any) -> NDArray[np.float64]:
    """Within-draw weights (chain, draw, particle) or over all draws (chain, draw)."""
    return np.asarray(idata.sample_stats["weight"].values, dtype=float)


def plot_beta(fit_or_idata: Any, axes: Any = None, bins: int = 40) -> Any:
    """Marginal histogram and per-chain trace of the inverse temperature ``beta``.

    Parameters
    ----------
    fit_or_idata
        A pemc-stan fit or its InferenceData.
    axes
        Two matplotlib axes (histogram, trace); new ones by default.
    bins
        Histogram bins on [0, 1].

    Returns
    -------
    numpy.ndarray of matplotlib axes

    Raises
    ------
    ImportError
        If matplotlib is not installed.
    """
    idata = _idata(fit_or_idata)
    axs = _axes(axes, 2, figsize=(10.0, 3.5))
    beta = np.asarray(idata.sample_stats["beta"].values, dtype=float)
    hist, trace = axs[0], axs[1]
    hist.hist(beta.reshape(-1), bins=bins, range=(0.0, 1.0), density=True, color="C0",
              alpha=0.7, label="draws")
    if beta.ndim == 2:  # one temperature per draw: uniform when log zeta = log Z
        hist.axhline(1.0, color="k", ls="--", lw=1, label="uniform (zeta = Z)")
    hist.set_xlabel(r"$\beta$")
    hist.set_ylabel("density")
    hist.set_title(r"marginal of $\beta$")
    hist.legend(loc="best", fontsize="small")
    for c in range(beta.shape[0]):
        values = beta[c] if beta.ndim == 2 else beta[c].mean(axis=-1)
        trace.plot(np.arange(values.shape[0]), values, lw=0.6, label=f"chain {c + 1}")
    trace.set_ylim(0.0, 1.0)
    trace.set_xlabel("draw")
    trace.set_ylabel(r"$\beta$" if beta.ndim == 2 else r"mean $\beta$ over pseudo-samples")
    trace.set_title(r"trace of $\beta$")
    return axs


def plot_weights(fit_or_idata: Any, axes: Any = None, bins: int = 50) -> Any:
    """Distribution of the normalised weights (log10) and, for PE, of the per-draw ESS.

    Parameters
    ----------
    fit_or_idata
        A pemc-stan fit or its InferenceData.
    axes
        Two matplotlib axes; new ones by default.
    bins
        Histogram bins.

    Returns
    -------
    numpy.ndarray of matplotlib axes

    Raises
    ------
    ImportError
        If matplotlib is not installed.
    """
    idata = _idata(fit_or_idata)
    axs = _axes(axes, 2, figsize=(10.0, 3.5))
    w = _normalised_weights(idata).reshape(-1)
    positive = w[w > 0]
    axs[0].hist(np.log10(positive), bins=bins, color="C1", alpha=0.8)
    axs[0].set_xlabel(r"$\log_{10}$ normalised weight")
    axs[0].set_ylabel("count")
    particles = _particle_dims(idata)
    if particles:
        axs[0].set_title("weights within each draw")
        ess = np.asarray(idata.sample_stats["weight_ess"].values, dtype=float).reshape(-1)
        n = int(idata.sample_stats.sizes.get(particles[0], 1))
        axs[1].hist(ess, bins=bins, range=(1.0, max(n, 1.0 + 1e-9)), color="C2", alpha=0.8)
        axs[1].set_xlabel("weight ESS per draw (1 to N)")
        axs[1].set_ylabel("count")
        axs[1].set_title(f"per-draw weight ESS (N = {n})")
    else:
        axs[0].set_title(r"weights $w_1$ over all draws")
        order = np.sort(w)[::-1]
        axs[1].plot(np.arange(1, order.size + 1) / order.size, np.cumsum(order), color="C2")
        axs[1].plot([0, 1], [0, 1], color="k", ls="--", lw=1, label="equal weights")
        axs[1].set_xlabel("share of draws (largest weights first)")
        axs[1].set_ylabel("share of total weight")
        ess = idata.sample_stats.attrs.get("weight_ess")
        axs[1].set_title("weight concentration" + (f" (ESS {float(ess):.0f})"
                                                   if ess is not None else ""))
        axs[1].legend(loc="lower right", fontsize="small")
    return axs


def select_column(ds: Any, column: str, lead: tuple[str, ...] = ()) -> NDArray[np.float64]:
    """Values of ``name`` or ``name[i,j]`` (Stan's 1-based indices) from a dataset.

    The indices are positions along the variable's own dims (after ``chain``, ``draw``
    and ``lead``); the values keep the leading dims.

    Raises
    ------
    KeyError
        If the variable is not in the dataset or the indices do not fit.
    """
    m = re.fullmatch(r"([^\[\]]+)(?:\[([0-9,\s]+)\])?", column.strip())
    if m is None or m.group(1) not in ds.data_vars:
        raise KeyError(f"{column!r} is not a variable of the extended draws; available: "
                       f"{sorted(ds.data_vars)}")
    da = ds[m.group(1)]
    idx = [int(i) - 1 for i in m.group(2).split(",")] if m.group(2) else []
    own = [d for d in da.dims if d not in ("chain", "draw", *lead)]
    if len(idx) != len(own):
        raise KeyError(f"{column!r} needs {len(own)} indices (dims {own})")
    if idx:
        da = da.isel({d: i for d, i in zip(own, idx, strict=True)})
    return np.asarray(da.values, dtype=float)


def plot_extended_draws(fit_or_idata: Any, x: str | None = None, y: str = "beta",
                        ax: Any = None, max_points: int = 3000, seed: int = 0,
                        size: float = 200.0) -> Any:
    """Extended draws in 2-D, each point sized by its weight (CT paper, figure 1c).

    Parameters
    ----------
    fit_or_idata
        A pemc-stan fit or its InferenceData (needs the ``extended_posterior``
        group).
    x
        The horizontal variable: a parameter column such as ``"x"`` or
        ``"mu[2]"`` (default: the first parameter's first element).
    y
        ``"beta"`` (default, as in figure 1c) or another parameter column.
    ax
        Matplotlib axes; a new one by default.
    max_points
        Plot at most this many points (a seeded random subset).
    seed
        Seed of that subset.
    size
        Marker area of a point carrying the largest weight.

    Returns
    -------
    matplotlib axes

    Raises
    ------
    ImportError
        If matplotlib is not installed.
    KeyError
        If ``x`` or ``y`` is not a variable of the extended draws.
    ValueError
        If the InferenceData has no ``extended_posterior`` group.
    """
    idata = _idata(fit_or_idata)
    if "extended_posterior" not in idata.groups():
        raise ValueError("the InferenceData has no extended_posterior group; convert the fit "
                         "with to_inference_data(fit, include_extended=True)")
    ext = idata.extended_posterior
    particles = _particle_dims(idata)
    if x is None:
        names = [v for v in ext.data_vars if not v.startswith("pemc_")]
        if not names:
            raise KeyError("the extended draws hold no parameter to plot")
        x = names[0]
        own = [d for d in ext[x].dims if d not in ("chain", "draw", *particles)]
        if own:
            x = x + "[" + ",".join("1" for _ in own) + "]"
    xs = select_column(ext, x, particles)
    ys = np.asarray(idata.sample_stats["beta"].values if y == "beta"
                    else select_column(ext, y, particles), dtype=float)
    w = _normalised_weights(idata)
    if particles:
        # weights normalised within each draw: every draw carries total weight 1
        w = w / w.shape[0] / w.shape[1]
    ys = np.broadcast_to(ys, xs.shape) if ys.shape != xs.shape else ys
    xs, ys, w = xs.reshape(-1), ys.reshape(-1), np.broadcast_to(w, xs.shape).reshape(-1)
    ok = np.isfinite(xs) & np.isfinite(ys) & np.isfinite(w)
    xs, ys, w = xs[ok], ys[ok], w[ok]
    if xs.size > max_points:
        keep = np.random.default_rng(seed).choice(xs.size, max_points, replace=False)
        xs, ys, w = xs[keep], ys[keep], w[keep]
    top = float(np.max(w)) if w.size else 1.0
    axis = _axes(ax)
    axis.scatter(xs, ys, s=size * w / (top if top > 0 else 1.0), alpha=0.5,
                 edgecolors="C0", facecolors="none", linewidths=0.8)
    axis.set_xlabel(x)
    axis.set_ylabel(r"$\beta$" if y == "beta" else y)
    axis.set_title("extended draws, area proportional to weight")
    if y == "beta":
        axis.set_ylim(-0.02, 1.02)
    return axis
