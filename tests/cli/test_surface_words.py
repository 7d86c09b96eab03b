"""Advice in the command line's own words, and CmdStan's names read as ours."""

from __future__ import annotations

import pytest

from pemc_stan.cli import build_parser
from pemc_stan.cli.console import cli_words, use_flags
from pemc_stan.cli.parsing import all_option_strings, cmdstanpy_spellings


@pytest.fixture(autouse=True)
def _flags() -> None:
    use_flags(all_option_strings(build_parser()))


@pytest.mark.parametrize(("python", "cli"), [
    ("to spare the split's attempt next time, pass split_modes='never'",
     "to spare the split's attempt next time, pass --split-modes never"),
    ("Pass max_treedepth=12 or adapt_delta=0.99", "Pass --max-treedepth 12 or --adapt-delta 0.99"),
    ("use estimator='ct'", "use --estimator ct"),
    ("run longer (iter_sampling)", "run longer (--iter-sampling)"),
    ("x=3 and (x_1) are the model's, not flags", "x=3 and (x_1) are the model's, not flags"),
    ("pass overwrite=True to replace them, or another folder (output_dir)",
     "pass --overwrite to replace them, or another folder (--output-dir)"),
    ("(or pass plots=False)", "(or pass --no-plots)"),
])
def test_python_advice_is_shown_as_flags(python: str, cli: str) -> None:
    assert cli_words(python) == cli


def test_the_command_line_s_log_lines_have_no_python_spelling(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A follow-up's reason is logged in the library's words; the command line shows it
    in its own (a new user's log said ``stopped at max_treedepth=10``)."""
    import logging

    from pemc_stan.cli.console import configure_logging

    root = logging.getLogger("pemc_stan")
    saved = list(root.handlers), root.level, root.propagate
    try:
        configure_logging(debug=False, quiet=False)
        logging.getLogger("pemc_stan.sampling.follow_up").info(
            "follow-up 3: max_treedepth 10 -> 12 after max_treedepth (27%% stopped at "
            "max_treedepth=%d); pass split_modes='never'", 10)
    finally:
        root.handlers[:], root.level, root.propagate = saved
    err = capsys.readouterr().err
    assert "stopped at --max-treedepth 10); pass --split-modes never" in err, err
    assert "=" not in err, err


def test_cmdstan_names_are_read_as_this_command_line_s() -> None:
    words = ["sample", "m.stan", "num_samples=2000", "adapt", "delta=0.95", "--num-warmup",
             "500", "--max_depth=12", "--iter_sampling", "10"]
    assert cmdstanpy_spellings(build_parser(), words) == [
        "sample", "m.stan", "--iter-sampling=2000", "--adapt-delta=0.95", "--iter-warmup", "500",
        "--max-treedepth=12", "--iter-sampling", "10"]


def test_the_command_line_s_report_has_no_python_spelling(
        capsys: pytest.CaptureFixture[str]) -> None:
    from pathlib import Path
    from types import SimpleNamespace

    import pandas as pd

    from pemc_stan.cli.options import SamplerArgs
    from pemc_stan.cli.sample import _print_report
    from pemc_stan.output.diagnostics import Reason, Verdict

    reason = Reason("rhat", "R-hat 1.2 > 1.05", "run longer (iter_sampling), or pass "
                    "split_modes='never'")
    saved = SimpleNamespace(
        table=pd.DataFrame({"mean": [0.1]}, index=["mu"]), folder=Path("out"), files=(),
        diagnostics={"messages": ["Pass max_treedepth=12"], "mode_split": "pass "
                     "split_modes='never' to spare it", "sampler": {"chains": 4}},
        verdict=Verdict((reason,), ("rhat",)), estimates={"cost": None}, log_z=None)
    _print_report("continuous tempering", Path("m.stan"),
                  SamplerArgs(chains=2, iter_sampling=10, seed=1), True, saved, (2, 20))
    out = capsys.readouterr().out
    assert "--split-modes never" in out and "--max-treedepth 12" in out
    assert "(--iter-sampling)" in out
    for python in ("split_modes=", "max_treedepth=", "(iter_sampling)"):
        assert python not in out, python
    assert "  sampler: chains=4" in out  # a record, not advice


@pytest.mark.parametrize(("ended", "budget", "code", "line"), [
    ("over_budget", 4.0, 8, "remedy left: --budget 8 lets the follow-ups go on (it was 4)"),
    ("over_budget", 8.0, 8, "remedy left: --budget 16 lets the follow-ups go on (it was 8)"),
    ("split_budget", 10.0, 8, "remedy left: --budget 16 lets the follow-ups go on (it was 10)"),
    ("over_budget", 16.0, 11, "no remedy left: the follow-ups ran to a budget of 16 times the "
     "first attempt (the largest advised is 16)"),
    ("no_budget", 1.0, 8, "remedy left: --budget 4 lets the follow-ups go on (it was 1)"),
    ("no_remedy", 4.0, 11, "no remedy left: no follow-up: no mechanical remedy (pilot)"),
    ("beyond_draws", 4.0, 11, "no remedy left: no follow-up: no mechanical remedy (pilot)"),
])
def test_a_suspect_run_ends_with_what_is_left_and_its_own_exit_code(
        ended: str, budget: float, code: int, line: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The advice is a ladder with an end: each rung doubles the budget, up to the
    largest advised, and then, or for a reason no run fixes, no remedy is left."""
    from pemc_stan.cli.sample import _suspect_end
    from pemc_stan.sampling.follow_up import FollowUp, FollowUpStep

    record = FollowUp(budget, 100, 100, [FollowUpStep("", "pilot", verdict="no mechanical "
                                                                       "remedy")], ended=ended)
    assert int(_suspect_end(record, seed=7)) == code
    printed = capsys.readouterr().out
    assert printed.startswith(line)
    if code == 8:  # the whole next step, mechanically: the same run, followed further
        rung = line.split()[3]
        assert f"run the same command with --budget {rung} --seed 7 --overwrite" in printed
    assert "split_modes=" not in printed and "iter_sampling=" not in printed


#: Flag spellings a library string may hold: commands a user types in a shell (pip's,
#: ``pemc-stan runtime --build``) and stanc's own arguments.
_SHELL_FLAGS = ("--force-reinstall", "--build", "--version", "--info", "--include-paths",
                "--filename-in-msg", "--print-canonical", "--auto-format", "--canonicalize")


def _strings(tree: object) -> list[tuple[int, str]]:
    """The string constants of a module that are not docstrings, with their lines."""
    import ast

    assert isinstance(tree, ast.Module)
    docs = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant):
            docs.add(id(body[0].value))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docs]


def test_the_library_speaks_python_not_flags() -> None:
    """Messages of the package outside ``cli/`` (errors, remedies, warnings, the verdict)
    reach Python users as they are, so they name keyword arguments (``overwrite=True``),
    never flags; the command line turns them into flags (:func:`cli_words`)."""
    import ast
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "pemc_stan"  # the source, not a wheel's copy
    flag = re.compile(r"(?<![\w-])--[a-z][a-z-]+")
    found = []
    for path in sorted(root.rglob("*.py")):
        if "cli" in path.relative_to(root).parts:
            continue
        for line, text in _strings(ast.parse(path.read_text())):
            found.extend(f"{path.relative_to(root)}:{line}: {word}"
                         for word in flag.findall(text) if word not in _SHELL_FLAGS)
    assert not found, "\n".join(found)
