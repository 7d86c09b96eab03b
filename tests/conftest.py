"""Shared fixtures.

Tests marked ``compiled`` compile Stan models; they share one session-wide,
content-hash-keyed model cache (pemc-stan's own, under the user cache
directory), so a model is compiled once per machine, not once per test.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cmdstanpy
import pytest

from pemc_stan.backend import runtime
from pemc_stan.backend.compile import compile_model

ROOT = Path(__file__).resolve().parent.parent


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--all-corpus", action="store_true", default=False,
        help="check the log-density rewrite against Stan's log_prob on every program of "
             "tests/stan_corpus (one compile each, ~8 minutes on 2 cores from a cold "
             "model cache; CI runs it as a step of its own); without it, on the programs "
             "that exercise the language's constructs one by one")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--all-corpus"):
        return
    skip = pytest.mark.skip(reason="a whole model of the corpus: checked with --all-corpus "
                                   "(CI's corpus step)")
    for item in items:
        if item.get_closest_marker("corpus_model") is not None:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _cli_logging_undone() -> Iterator[None]:
    """Undo what a test's ``pemc-stan`` command line set up for its process (the
    ``pemc_stan`` loggers' handlers and propagation, ``warnings.showwarning``): a later
    test in the same worker must see the library's records through ``caplog``."""
    names = ("pemc_stan", "pemc_stan.backend.progress")
    saved = [(logging.getLogger(n), list(logging.getLogger(n).handlers),
              logging.getLogger(n).level, logging.getLogger(n).propagate) for n in names]
    show = warnings.showwarning
    yield
    warnings.showwarning = show
    for log, handlers, level, propagate in saved:
        log.handlers[:], log.propagate = handlers, propagate
        log.setLevel(level)


@pytest.fixture(scope="session")
def cmdstan_installation() -> runtime.CmdStanInstallation:
    """The CmdStan installation the compiled tests run through (built if needed)."""
    return runtime.activate(show_progress=True)


@pytest.fixture(scope="session")
def compiled(
    cmdstan_installation: runtime.CmdStanInstallation,
) -> Callable[..., cmdstanpy.CmdStanModel]:
    """Compile a Stan program (text or path) through the shared hash-keyed cache."""

    def _compile(program: str | os.PathLike[str], **kwargs: Any) -> cmdstanpy.CmdStanModel:
        return compile_model(program, **kwargs)

    return _compile
