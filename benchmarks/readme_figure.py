"""Draw the README's picture: plain NUTS vs pseudo-extended NUTS on the 20-Gaussian mixture.

Scenario (a) of ``models/gaussian_mixture_20`` (the PE paper's figure 2, top
row): 10,000 draws of plain NUTS and 10,000 resampled draws of pseudo-extended
NUTS (N = 5, log Z^ = 0 known, beta on (0.001, 1)), over the contours of the
exact density.  Writes ``models/gaussian_mixture_20/nuts_vs_pe.png``.

Usage::

    python benchmarks/readme_figure.py [--seed 1] [--draws 10000]
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import numpy as np

from pemc_stan.backend import runtime
from pemc_stan.backend.compile import compile_model
from pemc_stan.run.pipeline import method_model

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "models" / "gaussian_mixture_20"


def _log_density(grid: np.ndarray, data: dict) -> np.ndarray:
    mu = np.asarray(data["mu"])
    w = np.asarray(data["w"])
    s2 = np.asarray(data["sigma"]) ** 2
    d2 = ((grid[:, None, :] - mu[None, :, :]) ** 2).sum(-1)
    comp = np.log(w) - np.log(2 * np.pi * s2) - d2 / (2 * s2)
    m = comp.max(axis=1, keepdims=True)
    return (m + np.log(np.exp(comp - m).sum(axis=1, keepdims=True)))[:, 0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--draws", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=FOLDER / "nuts_vs_pe.png")
    args = parser.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    logging.getLogger("cmdstanpy").setLevel(logging.ERROR)
    runtime.activate()
    data = json.loads((FOLDER / "scenario_a.data.json").read_text())
    stan = FOLDER / "gaussian_mixture_20.stan"
    nuts = compile_model(stan).sample(data=data, chains=1, iter_sampling=args.draws,
                                      seed=args.seed, show_progress=False)
    x_nuts = nuts.stan_variable("x")
    pe = method_model(stan, data, method="pe", n_pseudo=5, beta_min=0.001, log_scale=0.0)
    fit = pe.sample(chains=1, iter_sampling=args.draws, seed=args.seed)
    resampled = fit.resampled_parameters_pd()
    x_pe = resampled[["x[1]", "x[2]"]].to_numpy()

    g = np.linspace(-1.0, 10.5, 300)
    gx, gy = np.meshgrid(g, g)
    dens = np.exp(_log_density(np.column_stack([gx.ravel(), gy.ravel()]), data))
    fig, axes = plt.subplots(1, 2, figsize=(9, 4.4), sharex=True, sharey=True)
    titles = (f"plain NUTS: modes visited {_visited(x_nuts, data)}/20",
              f"pseudo-extended NUTS (N = 5): {_visited(x_pe, data)}/20")
    for ax, x, title in zip(axes, (x_nuts, x_pe), titles, strict=True):
        ax.contour(gx, gy, dens.reshape(gx.shape), levels=6, colors="tab:blue",
                   linewidths=0.6)
        ax.scatter(x[:, 0], x[:, 1], s=3, color="k", alpha=0.25, lw=0)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("$x_1$")
    axes[0].set_ylabel("$x_2$")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}: {titles[0]}; {titles[1]}")
    return 0


def _visited(x: np.ndarray, data: dict) -> int:
    """Number of mixture components with at least one draw within 3 sd of their mean."""
    mu = np.asarray(data["mu"])
    sd = np.asarray(data["sigma"])
    d = np.sqrt(((x[:, None, :] - mu[None, :, :]) ** 2).sum(-1))
    return int(np.sum((d < 3 * sd[None, :]).any(axis=0)))


if __name__ == "__main__":
    raise SystemExit(main())
