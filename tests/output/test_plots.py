"""pemc_stan.output.plots on synthetic fits (Agg backend, no compilation).

Each plot is checked for what it draws: the histogram of beta integrates the
draws, the scatter of extended draws has one point per (draw, pseudo-sample)
with areas proportional to the weights.
"""

from __future__ import annotations

import sys
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from pemc_stan.errors import PseudoExtendedWarning
from pemc_stan.methods.pseudo_extended.fit import PseudoExtendedFit
from pemc_stan.output import plots
from pemc_stan.output.inference_data import to_inference_data
from pemc_stan.run.pipeline import transform_result

CODE = """
parameters { real x; vector[2] v; }
model { x ~ normal(0, 1); v ~ normal(0, 1); }
"""
pytestmark = pytest.mark.filterwarnings(
    "ignore:Passing a dict or None as alias_mapping:DeprecationWarning")  # arviz vs mpl 3.11

SAMPLER = ["lp__", "accept_stat__", "stepsize__", "treedepth__", "n_leapfrog__",
           "divergent__", "energy__"]


class _FakeFit:
    def __init__(self, columns: list[str], draws: np.ndarray) -> None:
        self.column_names = tuple(columns)
        self._draws = draws

    def draws(self, concat_chains: bool = False) -> np.ndarray:
        return self._draws


def _fake_idata(n_chains: int = 2, n_draws: int = 30, n: int = 3):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PseudoExtendedWarning)
        res = transform_result(CODE, method="pe", n_pseudo=n, beta_min=0.1, temper="posterior")
    cols = list(SAMPLER) + [f"x[{k}]" for k in range(1, n + 1)]
    cols += [f"v[{k},{j}]" for j in (1, 2) for k in range(1, n + 1)]
    for base in ("pemc_beta", "pemc_log_weight", "pemc_log_gamma"):
        cols += [f"{base}[{k}]" for k in range(1, n + 1)]
    rng = np.random.default_rng(3)
    arr = rng.normal(size=(n_draws, n_chains, len(cols)))
    for k in range(1, n + 1):
        arr[:, :, cols.index(f"pemc_beta[{k}]")] = rng.uniform(0.1, 1.0, (n_draws, n_chains))
    fit = PseudoExtendedFit(_FakeFit(cols, arr), res, log_scale=0.0, seed=1)
    return fit, to_inference_data(fit)


def test_plot_beta_histogram_and_trace() -> None:
    fit, idata = _fake_idata()
    axes = plots.plot_beta(idata, bins=10)
    hist, trace = axes
    heights = np.array([p.get_height() for p in hist.patches])
    widths = np.array([p.get_width() for p in hist.patches])
    assert np.sum(heights * widths) == pytest.approx(1.0)  # a density over [0, 1]
    counts, _ = np.histogram(fit.beta().reshape(-1), bins=10, range=(0, 1))
    np.testing.assert_allclose(heights * widths, counts / counts.sum())
    assert len(trace.get_lines()) == 2  # one line per chain
    np.testing.assert_allclose(trace.get_lines()[1].get_ydata(), fit.beta()[1].mean(axis=-1))
    plt.close("all")


def test_plot_weights_pseudo_extended() -> None:
    fit, idata = _fake_idata()
    axes = plots.plot_weights(fit_or_idata=idata, bins=8)
    assert sum(p.get_height() for p in axes[0].patches) == fit.normalised_weights().size
    assert sum(p.get_height() for p in axes[1].patches) == fit.weight_ess().size
    assert "N = 3" in axes[1].get_title()
    plt.close("all")


def test_plot_extended_draws_sizes_follow_weights() -> None:
    fit, idata = _fake_idata()
    ax = plots.plot_extended_draws(idata, x="v[2]", size=100.0)
    collection = ax.collections[0]
    offsets = collection.get_offsets()
    sizes = collection.get_sizes()
    assert offsets.shape == (fit.beta().size, 2)
    np.testing.assert_allclose(offsets[:, 0], fit.pseudo_samples("v[2]").reshape(-1))
    np.testing.assert_allclose(offsets[:, 1], fit.beta().reshape(-1))
    w = fit.normalised_weights().reshape(-1)
    np.testing.assert_allclose(sizes, 100.0 * w / w.max())
    assert ax.get_xlabel() == "v[2]"
    two_d = plots.plot_extended_draws(idata, x="x", y="v[1]", max_points=20)
    assert two_d.collections[0].get_offsets().shape == (20, 2)
    with pytest.raises(KeyError, match="nope"):
        plots.plot_extended_draws(idata, x="nope")
    plt.close("all")


def test_missing_matplotlib_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=r"pemc-stan\[plots\]"):
        plots._pyplot()


def test_plots_of_a_continuous_tempering_fit() -> None:
    from fakes import FakeCTFit  # the synthetic CT fit of the converter tests

    fit = FakeCTFit()
    idata = to_inference_data(fit)
    hist, trace = plots.plot_beta(idata)
    assert any(np.allclose(line.get_ydata(), 1.0) for line in hist.get_lines())  # uniform
    np.testing.assert_allclose(trace.get_lines()[0].get_ydata(), fit.beta()[0])
    share, curve = plots.plot_weights(idata)
    lorenz = curve.get_lines()[0].get_ydata()
    assert lorenz[-1] == pytest.approx(1.0) and np.all(np.diff(lorenz) >= 0)
    ax = plots.plot_extended_draws(idata, x="v[1]")
    offsets = ax.collections[0].get_offsets()
    np.testing.assert_allclose(offsets[:, 1], fit.beta().reshape(-1))
    w = np.exp(fit.log_weights()).reshape(-1)
    np.testing.assert_allclose(ax.collections[0].get_sizes(), 200.0 * w / w.max())
    plt.close("all")


def test_arviz_trace_and_pair_plots_work_on_the_inference_data() -> None:
    import arviz as az
    from fakes import fake_pe_fit

    idata = to_inference_data(fake_pe_fit())
    axes = az.plot_trace(idata, var_names=["tau", "v"])
    assert axes.shape == (2, 2)  # rows tau and v (its 3 elements overlaid): density, trace
    assert len(axes[1, 1].get_lines()) >= 3 * 3  # v: 3 elements x 3 chains
    pair = az.plot_pair(idata, var_names=["tau", "v"])
    assert np.asarray(pair).shape == (3, 3)  # 4 variables -> 3 x 3 lower triangle
    plt.close("all")
