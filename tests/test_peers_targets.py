"""The peers benchmark's targets: exact log Z against independent computations, and the
peers' likelihoods against SciPy's densities."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from scipy import stats

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"pemc_bench_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    sys.path.insert(0, str(BENCHMARKS))  # the scripts import their neighbours
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module


@pytest.fixture(scope="module")
def peers() -> ModuleType:
    return _load("peers")


@pytest.fixture(scope="module")
def every(peers: ModuleType) -> dict:
    return peers.targets()


@pytest.fixture(scope="module")
def worker() -> ModuleType:
    return _load("_peers_worker")


@pytest.mark.filterwarnings("ignore::scipy.integrate.IntegrationWarning")
@pytest.mark.parametrize("d, published", [(2, -1.75), (10, -14.59), (30, -60.13),
                                          (50, -112.42)])
def test_the_shells_log_z_is_feroz_and_hobsons(peers: ModuleType, d: int,
                                               published: float) -> None:
    assert peers.shells(d).log_z == pytest.approx(published, abs=0.006)


def _batch_log_likelihood(target, x: np.ndarray) -> np.ndarray:
    """The target's log likelihood at each row of ``x``, written apart from the worker's."""
    p = target.params
    if target.kind == "coin":
        return stats.binom.logpmf(p["k"], p["N"], x[:, 0] * x[:, 1])
    if target.kind == "shells":
        c = np.asarray(p["centres"])
        dist = np.linalg.norm(x[:, None, :] - c[None], axis=2)
        return np.logaddexp.reduce(stats.norm.logpdf(dist, p["r"], p["w"]), axis=1)
    sq = ((x[:, None, :] - np.asarray(p["mu"])[None]) ** 2).sum(axis=2)  # unit sds
    comps = -0.5 * sq - x.shape[1] * 0.5 * math.log(2 * math.pi)
    return np.logaddexp.reduce(comps, axis=1) - math.log(comps.shape[1])


@pytest.mark.parametrize("name", ["coin", "shells_2", "gmm40"])
def test_a_two_dimensional_log_z_agrees_with_plain_monte_carlo(every: dict, name: str) -> None:
    target = every[name]
    n = 400_000
    x = np.random.default_rng(1).uniform(target.lower, target.upper, (n, target.dim))
    ll = _batch_log_likelihood(target, x)
    w = np.exp(ll - ll.max())
    est = float(ll.max() + np.log(w.mean()))
    se = float(w.std() / math.sqrt(n) / w.mean())
    assert abs(est - target.log_z) < 4 * se, (est, se, target.log_z)
    assert se < 0.05  # enough draws that a wrong constant fails


def _tmix_draws(t: Any, seed: int, n: int) -> np.ndarray:
    """``n`` draws of a Student-t mixture target's components without the box."""
    mu = np.asarray(t.params["mu"])
    rng = np.random.default_rng(seed)
    return mu[rng.integers(0, len(mu), n)] + rng.standard_t(t.params["nu"], (n, t.dim))


def test_the_student_t_mixtures_log_z_is_its_share_inside_the_box(peers: ModuleType) -> None:
    t = peers.tmix(5)
    n = 1_000_000
    x = _tmix_draws(t, 2, n)
    inside = np.all((x > t.lower) & (x < t.upper), axis=1).mean()
    se = math.sqrt(inside * (1 - inside) / n) / inside
    est = math.log(inside) - t.dim * math.log(t.upper - t.lower)
    assert abs(est - t.log_z) < 4 * se and se < 0.002, (est, se, t.log_z)


def test_the_student_t_mixtures_means_are_the_draws_inside_the_box(peers: ModuleType) -> None:
    t = peers.tmix(5)
    x = _tmix_draws(t, 3, 400_000)
    x = x[np.all((x > t.lower) & (x < t.upper), axis=1)]
    se = x.std(axis=0) / math.sqrt(len(x))
    assert np.all(np.abs(x.mean(axis=0) - t.means) < 4 * se), (x.mean(axis=0), t.means)


def test_the_coin_s_mean_is_the_prior_draws_weighted_by_the_likelihood(peers: ModuleType
                                                                       ) -> None:
    t = peers.coin()
    rng = np.random.default_rng(4)
    x = rng.uniform(size=(400_000, 2))
    w = stats.binom.pmf(t.data["k"], t.data["N"], x[:, 0] * x[:, 1])
    mean = w @ x / w.sum()
    se = np.sqrt((w[:, None] ** 2 * (x - mean) ** 2).sum(axis=0)) / w.sum()
    assert np.all(np.abs(mean - t.means) < 4 * se) and np.all(se < 0.002)


def test_the_symmetric_targets_means_are_their_centres(every: dict) -> None:
    for name in ("shells_2", "shells_30", "corr_100", "eggbox"):
        t = every[name]
        assert t.means == pytest.approx([(t.lower + t.upper) / 2] * t.dim), name
    gmm = every["gmm40"]
    assert gmm.means == pytest.approx(np.mean(gmm.params["mu"], axis=0), abs=1e-12)


def test_the_eggbox_log_z_agrees_with_a_fine_midpoint_grid(peers: ModuleType) -> None:
    n = 4000
    h = 10 * np.pi / n
    g = (np.arange(n) + 0.5) * h
    c = np.cos(g / 2)
    ll = (2 + np.outer(c, c)) ** 5
    top = ll.max()
    grid = top + np.log(np.exp(ll - top).sum() * h * h) - 2 * np.log(10 * np.pi)
    assert peers.eggbox().log_z == pytest.approx(grid, abs=1e-6)


def test_the_peers_likelihoods_are_scipys_densities(every: dict, worker: ModuleType) -> None:
    rng = np.random.default_rng(3)
    for name in ("corr_10", "tmix_5", "gmm40", "coin", "shells_10"):
        t = every[name]
        x = rng.uniform(t.lower, t.upper, t.dim) * 0.3
        if t.kind == "shells":
            x[:] = 0.0
            x[0] = 3.5 + 1.99  # on a shell, where the density is not negligible
        mine = float(worker.log_likelihood(x, t.job(), np))
        p = t.params
        if t.kind == "corr_gauss":
            chol = np.asarray(p["chol"])
            ref = stats.multivariate_normal(np.zeros(t.dim), chol @ chol.T).logpdf(x)
        elif t.kind == "tmix":
            comps = stats.t.logpdf(x[None, :], p["nu"], loc=np.asarray(p["mu"])).sum(axis=1)
            ref = np.logaddexp.reduce(comps) - math.log(len(comps))
        elif t.kind == "gmm":
            comps = stats.norm.logpdf(x[None, :], loc=np.asarray(p["mu"])).sum(axis=1)
            ref = np.logaddexp.reduce(comps) - math.log(len(comps))
        elif t.kind == "shells":
            ref = _batch_log_likelihood(t, x[None])[0]
        else:
            ref = stats.binom.logpmf(p["k"], p["N"], x[0] * x[1])
        assert mine == pytest.approx(ref, rel=1e-10), name


def test_every_target_writes_its_density_in_one_stan_program_with_its_data(
        every: dict) -> None:
    for name, t in every.items():
        assert "target += -D * log(U - L);" in t.stan, name
        assert (t.data["D"], t.data["L"], t.data["U"]) == (t.dim, t.lower, t.upper), name
        assert "~" not in t.stan, name  # a sampling statement would drop constants


def test_the_summary_scores_the_latest_run_of_each_seed(peers: ModuleType) -> None:
    def rec(sampler: str, seed: int, log_z: float, se: float | None, verdict: str | None,
            seconds: float = 2.0) -> dict:
        out = {"target": "coin", "sampler": sampler, "seed": seed, "exact": 1.0,
               "log_z": log_z, "log_z_se": se, "seconds": seconds}
        return out if verdict is None else {**out, "verdict": verdict}

    records = [rec("ct", 1, 9.0, 0.1, "ok"),  # replaced by the rerun below
               rec("ct", 1, 1.5, 0.1, "ok"), rec("ct", 2, 0.9, 0.1, "suspect"),
               rec("ct", 3, 1.05, float("nan"), "ok"),  # no error bar: not within
               rec("smc", 1, 1.2, 0.01, None), rec("smc", 2, 1.0, 0.01, None),
               {"target": "coin", "sampler": "smc", "seed": 3, "exact": 1.0,
                "error": "timed out"}]
    rows = {r["sampler"]: r for r in peers.summarise(peers.latest(records, ["coin"], [1, 2, 3]))}
    ct, smc = rows["ct"], rows["smc"]
    assert ct["runs"] == 3 and ct["failed"] == 0
    assert ct["rmse"] == pytest.approx(np.sqrt((0.5**2 + 0.1**2 + 0.05**2) / 3))
    assert ct["within"] == pytest.approx(1 / 2)  # seed 1 at 5 SE, seed 2 at 1, seed 3 none
    assert (ct["ok"], ct["silent"]) == (2, 2)  # ok at 5 SE, and ok without an error bar
    assert ct["acc_per_s"] == pytest.approx(1 / (ct["rmse"] ** 2 * 2.0))
    assert smc["runs"] == 2 and smc["failed"] == 1 and smc["within"] is None
    text = peers.table(list(rows.values()))
    ratio = ct["acc_per_s"] / smc["acc_per_s"]
    assert f"{ratio:9.3g}" in text.splitlines()[1]


def test_a_mean_beyond_its_error_bar_is_a_miss_unless_the_bar_is_named_unreliable(
        peers: ModuleType) -> None:
    def rec(seed: int, mean: float, khat: float) -> dict:
        return {"target": "coin", "sampler": "ct", "seed": seed, "exact": 1.0, "log_z": 1.0,
                "log_z_se": 0.1, "seconds": 1.0, "verdict": "ok", "exact_means": [0.5, 0.5],
                "mean_x": [0.5, mean], "mean_x_se": [0.01, 0.01], "mean_x_khat": [0.2, khat],
                "mean_x_khat_max": [0.7, 0.7]}

    runs = [rec(1, 0.53, 0.2), rec(2, 0.56, 0.2), rec(3, 0.56, 0.9)]
    assert [peers.means_within(r) for r in runs] == [True, False, True]
    row = peers.summarise(runs)[0]
    assert row["means_within"] == pytest.approx(2 / 3) and row["silent"] == 1
    no_means = {k: v for k, v in runs[1].items() if not k.startswith("mean_x")}
    assert peers.means_within(no_means) is None
    assert peers.summarise([no_means])[0]["means_within"] is None


def test_the_calibration_takes_each_seed_s_latest_log_z_of_the_targets() -> None:
    calibration = _load("calibration")

    def rec(sampler: str, seed: int, log_z: float | None, se: float | None,
            verdict: str = "ok", target: str = "coin") -> dict:
        return {"target": target, "sampler": sampler, "seed": seed, "exact": 1.0,
                "log_z": log_z, "log_z_se": se, "verdict": verdict}

    records = [rec("ct", 1, 9.0, 0.1),  # replaced by the rerun below
               rec("ct", 1, 1.2, 0.1), rec("ct", 2, 0.7, 0.1, "suspect"),
               rec("ct", 3, 1.05, float("nan")),  # no error bar: no z-score
               rec("ct", 4, None, None), rec("pe", 1, 3.0, 0.5),
               rec("ct", 1, 1.0, 0.2, target="eggbox"), rec("ct", 11, 5.0, 0.1)]
    assert sorted(calibration.peers_z(records, "ct", range(1, 11))) == \
        pytest.approx([-3.0, 0.0, 2.0])
    assert sorted(calibration.peers_z(records, "ct", range(1, 11), ok_only=True)) == \
        pytest.approx([0.0, 2.0])
    assert calibration.peers_z(records, "pe", range(1, 11)) == pytest.approx([4.0])
    with_means = [{**rec("ct", 1, 1.0, 0.1), "exact_means": [0.5, 0.5], "mean_x": [0.6, 0.4],
                   "mean_x_se": [0.05, 0.0]}]  # no error bar: no z-score
    assert calibration.peers_z(with_means, "ct", range(1, 11), means=True) == \
        pytest.approx([2.0])
