"""``pemc_stan.evidence``: its options and inputs (no compilation), and the estimators on
Stan models with analytic evidence (compiled, calibration).

For each model and estimator, 10 independent seeded runs must put the exact
log Z within 4 reported standard errors in at least 9 runs, and the observed
spread of log Z over the runs must be within a factor 2 of the mean reported
standard error (both directions: errors neither inflated nor too small).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pemc_stan.errors import EvidenceDisagreementWarning, OptionsError
from pemc_stan.estimators.log_z import EvidenceEstimate, bayes_factor
from pemc_stan.modes.bridge import frame_chain_arrays
from pemc_stan.run.evidence import _estimator_argument, compare_methods, evidence
from pemc_stan.run.evidence_options import EvidenceOptions

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "models"
SEEDS = range(1, 11)


def _normal_normal_exact() -> float:
    sys.path.insert(0, str(MODELS / "normal_normal"))
    try:
        from generate_data import exact  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    return float(exact(json.loads((MODELS / "normal_normal" / "data.json").read_text()))[
        "log_evidence"])


CASES: dict[str, tuple[Path, Path, Callable[[], float]]] = {
    "normal_normal": (MODELS / "normal_normal" / "normal_normal.stan",
                      MODELS / "normal_normal" / "data.json", _normal_normal_exact),
    "linear_regression": (
        MODELS / "linear_regression" / "linear_regression.stan",
        MODELS / "linear_regression" / "full.data.json",
        lambda: float(json.loads((MODELS / "linear_regression" / "exact.json").read_text())[
            "log_evidence_full"])),
    "beta_binomial": (
        MODELS / "beta_binomial" / "beta_binomial.stan", MODELS / "beta_binomial" / "data.json",
        lambda: float(json.loads((MODELS / "beta_binomial" / "exact.json").read_text())[
            "log_evidence"])),
}

NUTS = {"chains": 2, "iter_warmup": 300, "iter_sampling": 1000}
CT = {"chains": 2, "iter_warmup": 500, "iter_sampling": 1000}


#: The largest standard error an evidence check accepts: 4 SE below 0.3, so a bias of 0.3
#: nats (or log 2) cannot hide inside the error bars.
SE_CAP = 0.07


def check_calibration(label: str, estimates: list[EvidenceEstimate], exact: float) -> None:
    """>= 9/10 within 4 SE of the exact value; observed SD within a factor 2 of mean SE;
    every SE below :data:`SE_CAP`."""
    z = np.array([e.log_z for e in estimates])
    se = np.array([e.std_error for e in estimates])
    hits = int(np.sum(np.abs(z - exact) <= 4 * se))
    ratio = float(np.std(z, ddof=1) / np.mean(se))
    print(f"\n{label}: hits {hits}/{len(z)}, observed sd {np.std(z, ddof=1):.3g}, mean SE "
          f"{np.mean(se):.3g}, ratio {ratio:.2f}, mean error {np.mean(z) - exact:+.3g}")
    assert np.max(se) < SE_CAP, (label, se)
    assert hits >= 9, (label, z - exact, se)
    assert 0.5 <= ratio <= 2.0, (label, ratio, z, se)


@cache
def _nuts_estimates(case: str) -> dict[str, list[EvidenceEstimate]]:
    """Bridge and Student-t PSIS on the same 10 independent NUTS runs (one per seed)."""
    from pemc_stan.backend.compile import compile_model

    stan, data, _ = CASES[case]
    model = compile_model(stan, name=case)
    out: dict[str, list[EvidenceEstimate]] = {"bridge": [], "bridge_warp3": [], "is": []}
    for seed in SEEDS:
        fit = model.sample(data=str(data), seed=seed, show_progress=False, sig_figs=18, **NUTS)
        for key in out:
            estimator, warp = key.removesuffix("_warp3"), key.endswith("_warp3")
            out[key].append(evidence(fit, data, estimator=estimator, program=stan, seed=seed,
                                     is_draws=2000, warp=warp))
    return out


@pytest.mark.compiled
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("estimator", ["bridge", "bridge_warp3", "is"])
def test_calibration_on_nuts_draws(compiled: Any, case: str, estimator: str) -> None:
    est = _nuts_estimates(case)[estimator]
    check_calibration(f"{case} {estimator} (NUTS draws)", est, CASES[case][2]())
    assert all(e.diagnostics["draws_from"] == "nuts" for e in est)
    if estimator.startswith("bridge"):
        assert all(e.diagnostics["converged"] for e in est)
        assert all(e.diagnostics["warp"] == estimator.endswith("warp3") for e in est)


#: GARCH(1,1)'s stationarity bound: beta1's upper bound is 1 - alpha1, a parameter.
DEPENDENT_BOUND = """
parameters {
  real<lower=0, upper=1> alpha1;
  real<lower=0, upper=1 - alpha1> beta1;
}
model {
  target += normal_lpdf(alpha1 | 0.3, 0.2) + normal_lpdf(beta1 | 0.5, 0.3);
}
"""


@pytest.mark.compiled
@pytest.mark.parametrize("estimator", ["bridge", "bridge_warp3"])
def test_calibration_with_a_bound_that_depends_on_a_parameter(compiled: Any, estimator: str
                                                              ) -> None:
    """Bridge sampling maps each draw with its own bound (the triangle 0 < beta1 <
    1 - alpha1); log Z exact by quadrature."""
    from scipy import integrate, stats

    exact = np.log(integrate.quad(
        lambda a: stats.norm.pdf(a, 0.3, 0.2) * (stats.norm.cdf(1 - a, 0.5, 0.3)
                                                 - stats.norm.cdf(0.0, 0.5, 0.3)),
        0, 1, epsabs=1e-13)[0])
    model = compiled(DEPENDENT_BOUND, name="pemc_dependent_bound")
    est = []
    for seed in SEEDS:
        fit = model.sample(seed=seed, show_progress=False, sig_figs=18, **NUTS)
        est.append(evidence(fit, {}, estimator="bridge", program=DEPENDENT_BOUND, seed=seed,
                            warp=estimator.endswith("warp3")))
    check_calibration(f"dependent bound {estimator}", est, float(exact))


@pytest.mark.compiled
@pytest.mark.parametrize("case", ["linear_regression", "beta_binomial"])
def test_calibration_psis_pathfinder(compiled: Any, case: str) -> None:
    stan, data, exact = CASES[case]
    est = [evidence(stan, data, estimator="is", seed=seed, is_draws=2000) for seed in SEEDS]
    assert all(e.method == "psis_pathfinder" for e in est)
    assert all(e.diagnostics["pareto_k"] < 0.7 for e in est)
    check_calibration(f"{case} is (Pathfinder)", est, exact())


@pytest.mark.compiled
def test_psis_pathfinder_is_exact_for_a_gaussian_posterior(compiled: Any) -> None:
    """normal_normal's posterior is Gaussian, so Pathfinder's approximation is the posterior:
    constant weights, log Z exact to rounding (the calibration check would be degenerate)."""
    stan, data, exact = CASES["normal_normal"]
    for seed in (1, 2, 3):
        est = evidence(stan, data, estimator="is", seed=seed, is_draws=500)
        assert est.diagnostics["constant_weights"]
        assert est.log_z == pytest.approx(exact(), abs=1e-9)
        assert est.std_error < 1e-12


@cache
def _ct_estimates(case: str) -> dict[str, list[EvidenceEstimate]]:
    import pemc_stan

    stan, data, _ = CASES[case]
    out: dict[str, list[EvidenceEstimate]] = {"ct": [], "ti": [], "bridge": []}
    for seed in SEEDS:
        fit = pemc_stan.sample(stan, data=str(data), method="ct", split_modes="never",
                               seed=seed, **CT)
        for estimator in out:
            out[estimator].append(evidence(fit, estimator=estimator, seed=seed))
    return out


@pytest.mark.compiled
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("estimator", ["ct", "bridge"])
def test_calibration_on_continuously_tempered_fits(compiled: Any, case: str, estimator: str
                                                   ) -> None:
    est = _ct_estimates(case)[estimator]
    check_calibration(f"{case} {estimator} (CT fit)", est, CASES[case][2]())
    assert all(e.diagnostics["draws_from"] == "continuous_tempering" for e in est)
    if estimator == "ct":
        # TI over beta from CT draws, integrated exactly, IS eq. 20: d/db log(zeta^b mean_s
        # p(b|x_s)) = E_b[log zeta - Delta]; Simpson on 101 points reproduces it
        for a, b in zip(est, _ct_estimates(case)["ti"], strict=True):
            assert b.log_z == pytest.approx(a.log_z, abs=1e-6)
            assert b.std_error == pytest.approx(a.std_error, rel=1e-3)


def test_bridge_seed_on_fits_is_reproducible_and_not_the_fit_seed() -> None:
    # The fit resamples with default_rng(seed); the bridge must not draw its proposal from a
    # generator with that same seed (dependent streams made the CT-fit estimates spread 0.29
    # times their SE on normal_normal, failing the calibration test above)
    from pemc_stan.modes.bridge import bridge_seed

    assert bridge_seed(None) is None
    seeds = [bridge_seed(s) for s in range(1, 11)]
    assert seeds == [bridge_seed(s) for s in range(1, 11)]
    assert len(set(seeds)) == 10 and not set(seeds) & set(range(1, 11))


@pytest.mark.compiled
def test_bayes_factor_of_nested_linear_regressions(compiled: Any) -> None:
    """log BF(full vs one predictor dropped) by bridge sampling vs the analytic value."""
    folder = MODELS / "linear_regression"
    exact = json.loads((folder / "exact.json").read_text())
    stan = folder / "linear_regression.stan"
    full = evidence(stan, folder / "full.data.json", estimator="bridge", seed=11, **NUTS)
    reduced = evidence(stan, folder / "reduced.data.json", estimator="bridge", seed=12, **NUTS)
    bf = bayes_factor(full, reduced)
    assert bf.std_error == pytest.approx(np.hypot(full.std_error, reduced.std_error))
    assert bf.std_error < 0.02  # precise enough that the comparison means something
    assert abs(bf.log_bf - exact["log_bayes_factor_full_vs_reduced"]) <= 4 * bf.std_error
    # and the sign (which model is favoured) is right
    assert np.sign(bf.log_bf) == np.sign(exact["log_bayes_factor_full_vs_reduced"])


@pytest.mark.compiled
def test_evidence_from_a_model_and_method_comparison(compiled: Any) -> None:
    """evidence(path) runs NUTS itself; compare_methods agrees for two good estimators and
    flags a wrong one."""
    stan, data, exact = CASES["beta_binomial"]
    bridge = evidence(stan, data, estimator="bridge", seed=5, **NUTS)
    psis = evidence(stan, data, estimator="is", seed=6, is_draws=2000)
    assert abs(bridge.log_z - exact()) <= 4 * bridge.std_error and bridge.std_error < SE_CAP
    assert abs(psis.log_z - exact()) <= 4 * psis.std_error and psis.std_error < SE_CAP
    assert not compare_methods([bridge, psis], warn=False)[("bridge_sampling", "psis_pathfinder")
                                                          ].disagree
    wrong = EvidenceEstimate(bridge.log_z + 0.5, bridge.std_error, "wrong")
    with pytest.warns(UserWarning, match="disagree"):
        res = compare_methods({"bridge": bridge, "wrong": wrong})
    assert res[("bridge", "wrong")].disagree


@pytest.mark.compiled
def test_bridge_on_pseudo_extended_resampled_draws(compiled: Any) -> None:
    """Bridge sampling on a PseudoExtendedFit's resampled draws recovers the exact log Z."""
    import pemc_stan

    stan, data, exact = CASES["beta_binomial"]
    for seed in (1, 2, 3):
        fit = pemc_stan.sample(stan, data=str(data), method="pe", split_modes="never",
                               n_pseudo=2, temper="likelihood",
                               seed=seed, **NUTS)
        est = pemc_stan.evidence(fit, estimator="bridge", seed=seed)
        assert est.diagnostics["draws_from"] == "pseudo_extended"
        assert est.std_error < 0.02
        assert abs(est.log_z - exact()) <= 4 * est.std_error, (seed, est)


@pytest.mark.compiled
def test_evidence_runs_continuous_tempering_from_a_model(compiled: Any) -> None:
    stan, data, exact = CASES["normal_normal"]
    ct = evidence(stan, data, estimator="ct", seed=4, **CT)
    ti = evidence(stan, data, estimator="ti", seed=4, **CT)
    assert ct.method == "ct_eq20" and ti.method.startswith("ct_thermodynamic_integration")
    assert abs(ct.log_z - exact()) <= 4 * ct.std_error and ct.std_error < 0.01
    assert ti.log_z == pytest.approx(ct.log_z, abs=1e-6)  # same seed, same CT run
    # what sample runs and this skipped is said plainly (CT gives no split_modes)
    assert ct.diagnostics["skipped"].startswith("the mode split: estimator='ct' needs")
    assert "split_modes='auto'" in ct.diagnostics["skipped"]


# ------------------------------------------------------------------ options and inputs (no compile)

PROGRAM = """
data { int N; vector[N] y; }
parameters { real mu; real<lower=0> sigma; }
model { mu ~ normal(0, 1); sigma ~ exponential(1); y ~ normal(mu, sigma); }
generated quantities { real y_rep = normal_rng(mu, sigma); }
"""


def test_frame_chain_arrays() -> None:
    import pandas as pd

    frame = pd.DataFrame({"chain__": [1, 1, 2, 2], "mu": [0.0, 1.0, 2.0, 3.0],
                          "L[1,2]": [1.0, 2.0, 3.0, 4.0], "L[2,1]": [5.0, 6.0, 7.0, 8.0],
                          "L[1,1]": 0.0, "L[2,2]": 0.0})
    arr = frame_chain_arrays(frame, ["mu", "L"])
    assert arr["mu"].shape == (2, 2) and arr["L"].shape == (2, 2, 2, 2)
    assert arr["L"][1, 0, 0, 1] == 3.0 and arr["L"][0, 1, 1, 0] == 6.0
    with pytest.raises(KeyError, match="no column for parameter 'tau'"):
        frame_chain_arrays(frame, ["tau"])


@pytest.mark.parametrize("kwargs,match", [
    ({"estimator": "magic"}, "estimator='magic'"),
    ({"chains": 0}, "chains=0"),
    ({"iter_sampling": 2}, "iter_sampling=2"),
    ({"seed": -1}, "seed=-1"),
    ({"n_proposal": 1}, "n_proposal=1"),
    ({"is_proposal": "laplace"}, "is_proposal='laplace'"),
])
def test_evidence_options_validate(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        EvidenceOptions(**kwargs).validate()
    with pytest.raises(ValueError, match=match):
        evidence(PROGRAM, {"N": 1, "y": [0.0]}, **kwargs)  # fails before compiling


@pytest.mark.parametrize("kwargs,argument", [
    ({"estimator": "magic"}, "estimator"),
    ({"chains": 0}, "chains"),
    ({"is_proposal": "laplace"}, "is_proposal"),
])
def test_invalid_options_are_options_errors_naming_the_argument(kwargs: dict, argument: str
                                                                ) -> None:
    with pytest.raises(OptionsError) as info:
        EvidenceOptions(**kwargs).validate()
    assert info.value.argument == argument
    assert info.value.value == next(iter(kwargs.values()))


def test_method_is_a_deprecated_spelling_of_estimator() -> None:
    with pytest.warns(DeprecationWarning, match="method= is deprecated; use estimator="):
        assert _estimator_argument(None, "is") == "is"
    assert _estimator_argument(None, None) == "bridge"
    assert _estimator_argument("ct", None) == "ct"
    # the deprecated keyword is used as the estimator (and validated as one)
    with pytest.warns(DeprecationWarning, match="use estimator="), \
            pytest.raises(OptionsError, match="estimator='magic'"):
        evidence(PROGRAM, {"N": 1, "y": [0.0]}, method="magic")  # fails before compiling


def test_estimator_and_method_together_are_an_error() -> None:
    with pytest.raises(OptionsError, match="both name the estimator") as info:
        evidence(PROGRAM, {"N": 1, "y": [0.0]}, "bridge", method="is")
    assert info.value.argument == "method"


def test_evidence_rejects_unknown_inputs() -> None:
    with pytest.raises(TypeError, match="expected a .stan path"):
        evidence(42)


def test_compare_methods() -> None:
    a = EvidenceEstimate(-10.0, 0.01, "bridge_sampling")
    b = EvidenceEstimate(-10.02, 0.01, "psis")
    c = EvidenceEstimate(-10.2, 0.01, "ct_eq20")
    with pytest.warns(EvidenceDisagreementWarning, match="ct_eq20"):
        res = compare_methods([a, b, c])
    assert not res[("bridge_sampling", "psis")].disagree
    assert res[("bridge_sampling", "ct_eq20")].disagree and res[("psis", "ct_eq20")].disagree
    with pytest.raises(ValueError, match="at least two"):
        compare_methods([a])


def test_a_fit_s_evidence_is_its_own_log_z_unless_another_is_asked_for() -> None:
    """One default log Z per fit: ``evidence(fit)`` is ``fit.log_z()`` (CT's eq. 20, the
    split's bridge masses), named; an estimator asked for is that estimator."""
    from fakes import exact_ct_fit, split_fit

    ct = exact_ct_fit(0.3, n=4000)
    own = ct.log_z()
    got = evidence(ct)
    assert own is not None and got.method == own.method == "ct_eq20"
    assert (got.log_z, got.std_error) == (own.log_z, own.std_error)
    assert got.diagnostics["draws_from"] == "continuous_tempering"
    assert got.diagnostics["seed"] == ct.seed  # the fit's own: nothing else was drawn
    ti = evidence(ct, estimator="ti")
    assert ti.method.startswith("ct_thermodynamic_integration")
    split = split_fit([0.0, -1.0], [0.02, 0.03], [-5.0, 5.0], [1.0, 1.0], [0, 1, 0, 1])
    assert evidence(split).method == "mode_split_bridge"
    assert evidence(split).log_z == pytest.approx(np.logaddexp(0.0, -1.0))
