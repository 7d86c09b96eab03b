"""The line map of a transformed program: every statement the user wrote maps back to its
own line; CmdStan's messages about the generated program name the user's file and line."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import pytest

from pemc_stan.errors import PemcStanWarning
from pemc_stan.run.pipeline import transform_result
from pemc_stan.stan import ast
from pemc_stan.stan.parser import parse

PROGRAM = """\
functions {
  real halve(real a) {
    return a / 2;
  }
}
data {
  int<lower=1> N;
  vector[N] y;
}
transformed data {
  real m = mean(y);
}
parameters {
  real mu;
  real<lower=0> sigma;
}
model {
  mu ~ normal(m, 10);
  sigma ~ normal(0, 5);
  if (N > 1) {
    y ~ normal(mu, sigma);
  }
  for (n in 1:N) {
    target += -halve(square(y[n] - mu));
  }
}
"""


def _statement_lines(program: ast.Program, blocks: tuple[str, ...]) -> dict[int, str]:
    """Line -> text of every statement (and function) of ``blocks`` (simple statements only:
    those the transformation prints unchanged or rewrites on their own line)."""
    out: dict[int, str] = {}
    lines = PROGRAM.splitlines()
    for block in program.blocks():
        name = "functions" if isinstance(block, ast.FunctionsBlock) else block.name
        if name not in blocks:
            continue
        for node in ast.walk(block):
            if isinstance(node, (ast.Stmt, ast.FunctionDef)) and node.line and not isinstance(
                    node, ast.Block):
                out[node.line] = lines[node.line - 1].strip()
    return out


@pytest.mark.parametrize("method", ["ct", "pe"])
def test_every_user_statement_maps_back_to_its_line(method: str, tmp_path: Path) -> None:
    path = tmp_path / "lines.stan"
    path.write_text(PROGRAM)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PemcStanWarning)
        result = transform_result(path, method=method)
    line_map = result.line_map
    assert line_map is not None and line_map.user_file == "lines.stan"
    generated = result.stan_code.split("\n")
    assert len(line_map.sources) == len(generated)
    blocks = ("functions", "data", "transformed_data", "model")
    if method == "ct":  # PE declares a copy of each parameter per pseudo-sample
        blocks += ("parameters",)
    wanted = _statement_lines(parse(PROGRAM), blocks)
    found: dict[int, list[str]] = {}
    for g, source in enumerate(line_map.sources, 1):
        if source:
            found.setdefault(source, []).append(generated[g - 1].strip())
            assert line_map.user_line(g) == source
    assert set(wanted) <= set(found), sorted(set(wanted) - set(found))
    for line, text in wanted.items():
        if not text.startswith(("mu ~", "sigma ~", "y ~", "target +=")):
            assert text in found[line], (line, text, found[line])  # printed unchanged
    # the model's statements became the log density's accumulation, on their own lines
    assert any("normal_lpdf(y | mu, sigma)" in t for t in found[21])
    # generated code maps to nothing
    assert all(not s for g, s in zip(generated, line_map.sources, strict=True)
               if "pemc_" in g and "+=" not in g)


@pytest.mark.compiled
def test_a_cmdstan_message_names_the_users_file_and_line(
        cmdstan_installation: object, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """``reject`` at line 7 of the user's file rejects about 7% of the warm-up's proposals:
    CmdStan's message names the generated program; pemc-stan's warning names line 7 (the
    tempered run alone: a split's run of the user's own program would say the message
    first, in Stan's words, and the same message is said once)."""
    import pemc_stan

    path = tmp_path / "too_large.stan"
    path.write_text("parameters {\n  real x;\n}\nmodel {\n  x ~ normal(0, 1);\n"
                    "  if (x > 1.5) {\n    reject(\"x is too large: \", x);\n  }\n}\n")
    with caplog.at_level(logging.WARNING, logger="pemc_stan"):
        pemc_stan.sample(path, method="ct", chains=2, iter_warmup=200, iter_sampling=200,
                         seed=3, budget=1, bootstrap_rounds=0, split_modes="never")
    messages = [r.getMessage() for r in caplog.records
                if r.name == "pemc_stan.backend.cmdstanpy"]
    assert messages, caplog.text
    assert any("x is too large" in m and "(in your too_large.stan, line 7; generated program "
               "line" in m for m in messages), messages
    assert not any("too_large_ct.stan'" in m for m in messages), messages
