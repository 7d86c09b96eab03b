"""Reading programs: what is reported before anything is compiled (no compilation)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pemc_stan.errors import StanProgramError, UnsupportedConstructError
from pemc_stan.stan.inputs import read_program


def test_include_is_reported_as_unsupported_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "part.stan").write_text("real x;\n")
    model = tmp_path / "m.stan"
    model.write_text("parameters {\n  #include part.stan\n}\nmodel { }\n")
    with pytest.raises(UnsupportedConstructError, match="line 2.*#include is not supported"):
        read_program(model)


def test_binary_input_names_the_file(tmp_path: Path) -> None:
    model = tmp_path / "blob.stan"
    model.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    with pytest.raises(StanProgramError, match="blob.stan is not a text file"):
        read_program(model)


def test_a_program_is_read_once(tmp_path: Path) -> None:
    model = tmp_path / "m.stan"
    model.write_text("parameters { real x; } model { x ~ normal(0, 1); }\n")
    prog = read_program(model)
    assert prog.name == "m" and prog.path == model and prog.parameter_names == ["x"]
    assert read_program(prog) is prog  # not parsed again
    assert read_program(prog, "other").tree is prog.tree


# --------------------------------------------------------------------------- #
# data values, checked before anything is compiled
# --------------------------------------------------------------------------- #
_DATA_PROGRAM = """data {
  int<lower=0> N;
  vector[N] y;
  real mu1;
  array[2] int<lower=1, upper=N> idx;
}
parameters { real mu; }
model { mu ~ normal(mu1, 1); y ~ normal(mu, 1); }
"""
_GOOD = {"N": 2, "y": [1.0, 2.0], "mu1": 0.5, "idx": [1, 2]}


@pytest.mark.parametrize(("change", "fragment"), [
    ({"mu1": "abc"}, r"mu1 in d.json is 'abc' \(a string\) but 'real mu1'.*line 4"),
    ({"y": [1.0, "x"]}, r"y\[2\] in d.json is 'x'"),
    ({"mu1": None}, r"mu1 in d.json is null"),
    ({"N": 2.5}, r"N in d.json is 2.5 \(a real number\).*whole numbers"),
    ({"N": -1, "y": []}, r"N in d.json is -1, outside the bounds of 'int<lower=0> N'"),
    ({"idx": [1, 3]}, r"idx\[2\] in d.json is 3, outside the bounds"),
    ({"idx": [0, 1]}, r"idx\[1\] in d.json is 0, outside"),
])
def test_data_values_are_checked_naming_the_variable(change: dict[str, object],
                                                     fragment: str) -> None:
    from pemc_stan.errors import DataError
    from pemc_stan.stan.inputs import check_data

    program = read_program(_DATA_PROGRAM)
    with pytest.raises(DataError, match=fragment) as info:
        check_data(program, {**_GOOD, **change}, "d.json")
    assert info.value.variable == next(iter(change))


def test_good_data_pass_in_every_spelling(tmp_path: Path) -> None:
    import json

    import numpy as np

    from pemc_stan.stan.inputs import check_data, read_data

    program = read_program(_DATA_PROGRAM)
    check_data(program, _GOOD)
    with pytest.warns(UserWarning, match="CmdStan accepts it"):  # its non-finite strings
        check_data(program, {**_GOOD, "y": ["NaN", "-Inf"]})
    check_data(program, {"N": np.int64(2), "y": np.array([1.0, 2.0]), "mu1": np.float64(0),
                         "idx": np.array([2, 1])})
    path = tmp_path / "d.json"
    path.write_text(json.dumps(_GOOD))
    assert read_data(program, path) == _GOOD


def test_a_missing_data_variable_is_named_by_the_api_before_compiling(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import pemc_stan
    from pemc_stan.errors import DataError

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("compile_model was called")

    monkeypatch.setattr("pemc_stan.sampling.model.compile_model", never)
    monkeypatch.setattr("pemc_stan.run.evidence_sources.compile_model", never)
    for method in ("pe", "ct"):
        with pytest.raises(DataError, match="no value for 'mu1'"):
            pemc_stan.sample(_DATA_PROGRAM, {"N": 2, "y": [1, 2], "idx": [1, 2]}, method=method)
        with pytest.raises(DataError, match="mu1 in the data is 'abc'"):
            pemc_stan.sample(_DATA_PROGRAM, {**_GOOD, "mu1": "abc"}, method=method)
    with pytest.raises(DataError, match="no value for 'mu1'"):
        pemc_stan.evidence(_DATA_PROGRAM, {"N": 2, "y": [1, 2], "idx": [1, 2]})


def test_program_bytes_are_read_as_utf8_text() -> None:
    program = read_program(b"parameters { real x; } model { x ~ normal(0, 1); }")
    assert program.parameter_names == ["x"]
    with pytest.raises(StanProgramError, match="not UTF-8 text"):
        read_program(b"parameters { real \xff; }")


def test_data_of_other_libraries_and_edge_values() -> None:
    import pandas as pd

    from pemc_stan.errors import DataError
    from pemc_stan.stan.inputs import check_data

    program = read_program("data { int K; matrix[2, 2] A; array[K] real L; real<lower=L[1]> a; }"
                           "\nparameters { real x; } model { x ~ normal(a, 1); }")
    frame = pd.DataFrame([[1.0, 2.0], [3.0, 4.0]])
    check_data(program, {"K": 0, "A": frame, "L": [], "a": 1.0})  # bound not evaluable: CmdStan
    with pytest.raises(DataError, match="too large"):
        check_data(program, {"K": 0, "A": frame, "L": [], "a": 10**400})


# --------------------------------------------------------------------------- #
# NaN and infinite data values: refused where CmdStan would, else warned about
# --------------------------------------------------------------------------- #
_NON_FINITE_PROGRAM = """data {
  int<lower=0> N;
  array[N] int k;
  vector<lower=0>[N] pos;
  vector[N] y;
  real<upper=5> u;
  simplex[3] s;
  cov_matrix[2] S;
  ordered[2] o;
}
parameters { real mu; }
model { mu ~ normal(0, 1); y ~ normal(mu, 1); }
"""
_FINITE = {"N": 2, "k": [1, 2], "pos": [1.0, 2.0], "y": [0.5, -0.5], "u": 1.0,
           "s": [0.2, 0.3, 0.5], "S": [[1.0, 0.0], [0.0, 1.0]], "o": [0.0, 1.0]}


@pytest.mark.parametrize(("change", "fragment"), [
    ({"k": [1, float("nan")]}, r"^k\[2\] in d.json is NaN but 'array\[N\] int k'.*cannot be NaN"),
    ({"k": [1, "-Inf"]}, r"^k\[2\] in d.json is -Inf but .*integers"),
    ({"N": float("inf")}, r"^N in d.json is Inf but 'int<lower=0> N'"),
    ({"pos": [float("nan"), 1.0]},
     r"^pos\[1\] in d.json is NaN, which fails the bounds of 'vector<lower=0>\[N\] pos'"),
    ({"pos": [1.0, "NaN"]}, r"^pos\[2\] in d.json is NaN, which fails the bounds"),
    ({"u": "+inf"}, r"^u in d.json is Inf, outside the bounds of 'real<upper=5> u'"),
    ({"s": [0.2, "NaN", 0.5]}, r"^s\[2\] in d.json is NaN, which fails CmdStan's simplex check"),
    ({"s": [0.2, float("inf"), 0.5]}, r"^s\[2\] in d.json is Inf, which fails"),
    ({"S": [[1.0, float("nan")], [0.0, 1.0]]}, r"^S\[1,2\] in d.json is NaN, which fails"),
    ({"o": ["NaN", 1.0]}, r"^o\[1\] in d.json is NaN, which fails CmdStan's ordered check"),
])
def test_nan_and_inf_that_cmdstan_rejects_are_refused_in_one_line(
        change: dict[str, object], fragment: str) -> None:
    from pemc_stan.errors import DataError
    from pemc_stan.stan.inputs import check_data

    program = read_program(_NON_FINITE_PROGRAM)
    with pytest.raises(DataError, match=fragment) as info:
        check_data(program, {**_FINITE, **change}, "d.json")
    assert info.value.variable == next(iter(change))
    assert "\n" not in str(info.value) and info.value.remedy


@pytest.mark.parametrize(("change", "fragment"), [
    ({"y": [0.5, float("nan")]},
     r"^y\[2\] in d.json is NaN: CmdStan accepts it for 'vector\[N\] y'"),
    ({"y": ["+inf", "NaN"]}, r"^y\[1\] in d.json is Inf \(and 1 more NaN or infinite value of y\)"),
    ({"pos": [1.0, "Inf"]}, r"^pos\[2\] in d.json is Inf: CmdStan accepts it"),
    ({"u": "-Inf"}, r"^u in d.json is -Inf: CmdStan accepts it for 'real<upper=5> u'"),
    ({"o": ["-inf", "+inf"]}, r"^o\[1\] in d.json is -Inf"),
])
def test_nan_and_inf_that_cmdstan_accepts_are_warned_about_in_one_line(
        change: dict[str, object], fragment: str) -> None:
    import warnings

    from pemc_stan.errors import PemcStanWarning
    from pemc_stan.stan.inputs import check_data

    program = read_program(_NON_FINITE_PROGRAM)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_data(program, {**_FINITE, **change}, "d.json")
    messages = [str(w.message) for w in caught if issubclass(w.category, PemcStanWarning)]
    assert len(messages) == 1 and "\n" not in messages[0], messages
    assert re.search(fragment, messages[0]), messages[0]


def test_non_finite_json_data_are_checked_before_compiling(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    import json

    import pemc_stan
    from pemc_stan.errors import DataError

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("compile_model was called")

    monkeypatch.setattr("pemc_stan.sampling.model.compile_model", never)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**_FINITE, "pos": [1.0, "NaN"]}))
    with pytest.raises(DataError, match=r"pos\[2\] in bad.json is NaN"):
        pemc_stan.sample(_NON_FINITE_PROGRAM, path, method="pe")
    path.write_text(json.dumps(_FINITE).replace('"k": [1, 2]', '"k": [1, NaN]'))  # bare NaN
    with pytest.raises(DataError, match=r"k\[2\] in bad.json is NaN"):
        pemc_stan.sample(_NON_FINITE_PROGRAM, path, method="ct")


def test_a_nan_in_the_data_is_shown_once_where_logging_is_not_configured() -> None:
    """Python's last-resort handler prints a library's WARNING records when the
    application configured no logging: the warning alone must carry the message."""
    import subprocess
    import sys

    code = ("import warnings, pemc_stan.stan.inputs as i\n"
            f"p = i.read_program({_NON_FINITE_PROGRAM!r})\n"
            f"i.check_data(p, {{**{_FINITE!r}, 'y': [0.5, float('nan')]}}, 'd.json')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("y[2] in d.json is NaN") == 1, proc.stderr


def test_non_finite_entries_lists_each_nan_and_infinity_where_it_is() -> None:
    from pemc_stan.stan.inputs import non_finite_entries

    data = {"N": 2, "y": [[1.0, "NaN"], [float("inf"), 2.0]], "s": "-Inf", "ok": [1, 2]}
    assert non_finite_entries(data) == ["y[1,2] (NaN)", "y[2,1] (Inf)", "s (-Inf)"]
    assert non_finite_entries(None) == [] and non_finite_entries({"x": 1.5}) == []
