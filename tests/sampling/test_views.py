"""What ``f`` sees in ``fit.expectation(f)``: columns, and whole parameters by name."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from fakes import FrameRun

from pemc_stan.run.pipeline import transform_result
from pemc_stan.sampling.fit import ExtendedFit
from pemc_stan.sampling.views import NamedView, parameter_values

VECTOR = "parameters { vector[3] omega; matrix[2, 2] m; } model { omega ~ normal(0, 1); }"


def test_a_parameter_is_its_columns_in_its_declared_shape() -> None:
    # CmdStan writes a matrix column-major: m[1,1], m[2,1], m[1,2], m[2,2]
    values = {"m[1,1]": np.array([1.0]), "m[2,1]": np.array([2.0]),
              "m[1,2]": np.array([3.0]), "m[2,2]": np.array([4.0]), "mu": np.array([9.0])}
    m = parameter_values("m", values, values.__getitem__)
    assert m is not None and m.shape == (1, 2, 2)
    assert m[0].tolist() == [[1.0, 3.0], [2.0, 4.0]]
    assert parameter_values("mu", values, values.__getitem__) is None  # a scalar's column
    assert parameter_values("m1", values, values.__getitem__) is None


def test_an_unknown_name_says_which_parameters_there_are() -> None:
    values = {"omega[1]": np.zeros(2), "omega[2]": np.zeros(2), "sigma": np.zeros(2)}
    view = NamedView(values.__getitem__, values)
    assert view["sigma"] is values["sigma"]
    with pytest.raises(KeyError, match="its parameters are omega, sigma"):
        view["theta"]


def test_expectation_takes_a_whole_vector_parameter() -> None:
    """``fit.expectation(lambda v: v["omega"].max(axis=-1))``, as a user writes it."""
    rng = np.random.default_rng(3)
    n = 400
    omega = rng.normal(size=(n, 3))
    frame = {f"omega[{i + 1}]": omega[:, i] for i in range(3)}
    frame.update({f"m[{i},{j}]": rng.normal(size=n) for j in (1, 2) for i in (1, 2)})
    frame.update({"divergent__": np.zeros(n), "treedepth__": np.full(n, 3.0)})
    fit = ExtendedFit(FrameRun(frame, 4), transform_result(VECTOR, method="ct"), seed=1)
    top = fit.expectation(lambda v: v["omega"].max(axis=-1))
    assert top.mean == pytest.approx(omega.max(axis=1).mean())
    trace = fit.expectation(lambda v: v["m"][..., 0, 0] + v["m"][..., 1, 1])
    assert trace.mean == pytest.approx((frame["m[1,1]"] + frame["m[2,2]"]).mean())
    with pytest.raises(KeyError, match="its parameters are m, omega"):
        fit.expectation(lambda v: v["Omega"])


def test_the_summary_has_what_the_command_line_table_has() -> None:
    rng = np.random.default_rng(4)
    n = 4000
    frame = {f"omega[{i + 1}]": rng.normal(i, 1.0 + i, n) for i in range(3)}
    frame.update({f"m[{i},{j}]": rng.normal(size=n) for j in (1, 2) for i in (1, 2)})
    frame.update({"divergent__": np.zeros(n), "treedepth__": np.full(n, 3.0)})
    fit = ExtendedFit(FrameRun(frame, 4), transform_result(VECTOR, method="ct"), seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a fit judged suspect warns; the table is the test
        table = fit.summary()
    assert list(table.columns) == ["mean", "mcse", "ess", "khat", "sd", "hdi_5%", "hdi_95%",
                                   "ess_bulk", "ess_tail", "r_hat"]
    assert (table["khat"] < 0.4).all()  # Gaussian draws: light tails
    row = table.loc["omega[3]"]
    assert row["sd"] == pytest.approx(3.0, rel=0.05)
    assert row["hdi_5%"] < 2.0 < row["hdi_95%"]
    assert row["hdi_95%"] - row["hdi_5%"] == pytest.approx(2 * 1.645 * 3.0, rel=0.08)
    assert row["r_hat"] < 1.01 and row["ess_bulk"] > 1000

