"""Shared fixtures.

Tests marked ``compiled`` compile Stan models; they share one session-wide,
content-hash-keyed model cache (pemc-stan's own, under the user cache
directory), so a model is compiled once per machine, not once per test.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cmdstanpy
import pytest

from pemc_stan.backend import runtime
from pemc_stan.backend.compile import compile_model

ROOT = Path(__file__).resolve().parent.parent


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
