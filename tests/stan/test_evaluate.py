"""The one evaluator of data expressions: Stan's semantics, and what it cannot evaluate."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pemc_stan.errors import UnevaluableExpressionError
from pemc_stan.stan.evaluate import evaluate, scalar_definitions, size_of, with_definitions
from pemc_stan.stan.parser import parse, parse_expression


@pytest.mark.parametrize(("text", "expected"), [
    ("7 / 2", 3), ("-7 / 2", -3), ("7 %/% 2", 3), ("7 % 3", 1), ("7.0 / 2", 3.5),
    ("2 ^ 3", 8.0), ("K - 1", 4), ("x[2] * 2", 4.0), ("K > 3 ? 1 : 0", 1),
    ("sqrt(16) + log(1)", 4.0), ("min(K, 3)", 3), ("pi()", math.pi), ("sum(x)", 6.0),
    # Stan's return types: real for square, inv, fmin, pow and ^ of ints; int for
    # comparisons, ?: of ints, abs and min
    ("square(3) / 2", 4.5), ("inv(2)", 0.5), ("fmin(3, 4) / 2", 1.5), ("pow(2, -1)", 0.5),
    ("2 ^ -1", 0.5), ("(3 > 2) / 2", 0), ("(K > 3 ? 3 : 4) / 2", 1), ("abs(-3) / 2", 1),
    ("min(3, 4) / 2", 1),
])
def test_stan_semantics(text: str, expected: float) -> None:
    data = {"K": 5, "x": [1.0, 2.0, 3.0]}
    value = evaluate(parse_expression(text), data)
    assert float(np.asarray(value)) == pytest.approx(expected)
    if isinstance(expected, int):
        assert int(np.asarray(value)) == expected


def test_reshaping_fills_column_by_column_as_stan() -> None:
    """to_matrix(v, m, n) fills columns first (Stan's order); to_vector reads them back."""
    data = {"v": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "N": 3}
    m = evaluate(parse_expression("to_matrix(v, N, 2)"), data)
    np.testing.assert_array_equal(m, [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]])
    back = evaluate(parse_expression("to_vector(to_matrix(v, N, 2))"), data)
    np.testing.assert_array_equal(back, data["v"])
    with pytest.raises(UnevaluableExpressionError, match="to_matrix"):
        evaluate(parse_expression("to_matrix(v, 4, 2)"), data)


def test_what_cannot_be_evaluated_is_named() -> None:
    with pytest.raises(UnevaluableExpressionError) as err:
        evaluate(parse_expression("N + Kc"), {"N": 2})
    assert err.value.missing == "Kc" and "'Kc' is not in the data" in err.value.reason
    with pytest.raises(UnevaluableExpressionError, match="two containers"):
        evaluate(parse_expression("x * x"), {"x": [1.0, 2.0]})
    assert size_of(parse_expression("N / 2.0"), {"N": 3}) is None  # not an integer
    assert size_of(parse_expression("no_such"), {}) is None


def test_transformed_data_scalars_extend_the_data() -> None:
    prog = parse("data { int K; } transformed data { int Kc = K - 1; real h = Kc / 2.0; "
                 "vector[K] v = rep_vector(0, K); int m; m = 3; } "
                 "parameters { vector[Kc] b; } model { }")
    defs = scalar_definitions(prog)
    assert [name for name, _ in defs] == ["Kc", "h"]  # defined where declared, scalars only
    env = with_definitions({"K": 5}, defs)
    assert env["Kc"] == 4 and env["h"] == 2.0 and "m" not in env


# ------------------------------------------------------------------ bounds that use parameters

@pytest.mark.parametrize("text", ["1 - a", "fmax(a, b) * 2 + exp(-a)", "a * b", "a / b",
                                  "v[2] - a", "max(v) + a", "sum(w) * a", "a * w"])
def test_a_bound_of_parameters_has_each_draw_s_value(text: str) -> None:
    """Every draw's value is what the expression gives at that draw alone, whether NumPy
    takes all draws at once (scalar arithmetic) or the draws one by one (indexing,
    reductions, containers)."""
    from pemc_stan.stan.evaluate import evaluate_per_draw
    rng = np.random.default_rng(3)
    n = 5
    draws = {"a": rng.uniform(0.1, 1, n), "b": rng.uniform(0.1, 1, n),
             "v": rng.normal(size=(n, 3))}
    data = {"w": [1.0, 2.0]}
    expr = parse_expression(text)
    got = evaluate_per_draw(expr, data, draws, n)
    one_by_one = np.stack([np.asarray(evaluate(expr, {**data, **{k: v[i] for k, v in
                                                                 draws.items()}}), dtype=float)
                           for i in range(n)])
    assert got.shape[0] == n
    np.testing.assert_allclose(got, one_by_one)


def test_a_per_draw_value_broadcasts_over_the_elements_it_bounds() -> None:
    from pemc_stan.stan.evaluate import broadcast_per_draw
    scalar = np.arange(3.0)
    out = broadcast_per_draw(scalar, 3, (2, 4), "bound of x")
    assert out.shape == (3, 2, 4) and np.all(out[1] == 1.0)
    vec = np.arange(6.0).reshape(3, 2)
    np.testing.assert_array_equal(broadcast_per_draw(vec, 3, (2,), "bound of x"), vec)
    with pytest.raises(ValueError, match="bound of x has shape \\(4,\\) per draw"):
        broadcast_per_draw(np.ones((3, 4)), 3, (2,), "bound of x")
