"""Draws written for CmdStan's standalone generated quantities
(:mod:`pemc_stan.backend.standalone`; nothing compiles)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pemc_stan.backend.standalone import (
    _column_names,
    _read_column,
    stan_to_dotted,
    write_draws_csv,
)


def test_column_names_are_column_major_like_cmdstan() -> None:
    assert [c for c, _ in _column_names("a", ())] == ["a"]
    assert [c for c, _ in _column_names("m", (2, 3))] == [
        "m.1.1", "m.2.1", "m.1.2", "m.2.2", "m.1.3", "m.2.3"]


def test_bracket_columns_become_cmdstan_header_names() -> None:
    assert stan_to_dotted("mu") == "mu"
    assert stan_to_dotted("theta[2]") == "theta.2"
    assert stan_to_dotted("m[1, 3]") == "m.1.3"


def test_draws_are_written_one_row_each_in_the_given_order(tmp_path: Path) -> None:
    path = tmp_path / "draws.csv"
    n = write_draws_csv({"b": np.array([1.0, 2.0]), "a": np.array([[3.0, 4.0], [5.0, 6.0]])},
                        path)
    rows = [r for r in path.read_text().splitlines() if r and not r.startswith("#")]
    assert n == 2
    assert rows[0] == "lp__,accept_stat__,b,a.1,a.2"
    assert [float(v) for v in rows[2].split(",")[2:]] == [2.0, 5.0, 6.0]


def test_draws_are_written_exactly(tmp_path: Path) -> None:
    """Every double comes back bit for bit (CmdStan reads the shortest repr exactly)."""
    values = np.random.default_rng(3).standard_normal((500, 3)) * 10.0 ** np.arange(-9, 12, 7)
    path = tmp_path / "draws.csv"
    write_draws_csv({"x": values}, path)
    back = _read_column(path, "x.3", 500)
    assert np.array_equal(back, values[:, 2])


def test_a_column_is_read_with_cmdstans_non_finite_values(tmp_path: Path) -> None:
    path = tmp_path / "out.csv"
    path.write_text("# comment\nlp__,g\n0,1.5\n0,nan\n0,-inf\n# Elapsed Time\n")
    got = _read_column(path, "g", 3)
    assert got[0] == 1.5 and np.isnan(got[1]) and got[2] == -np.inf
    with pytest.raises(RuntimeError, match="has no column h"):
        _read_column(path, "h", 3)
    with pytest.raises(RuntimeError, match="returned 3 rows for 4 draws"):
        _read_column(path, "g", 4)
