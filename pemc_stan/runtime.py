"""Resolve the CmdStan installation pemc-stan runs through.

Order: an explicit path, then ``$CMDSTAN``, then whatever cmdstanpy finds on
its own; otherwise a CmdStan-compatible installation built once from the
installed ``httpstan`` wheel (see :func:`build_compatible`).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

logger = logging.getLogger(__name__)


class RuntimeError_(Exception):
    """Placeholder; replaced by the full runtime module."""


def httpstan_dir() -> Path:
    """Return the directory of the installed httpstan package.

    Raises
    ------
    ImportError
        If httpstan is not installed.
    """
    import importlib.util

    spec = importlib.util.find_spec("httpstan")
    if spec is None or spec.origin is None:
        raise ImportError(
            "httpstan is not installed: pemc-stan needs it for stanc and the Stan "
            "C++ library when no CmdStan is installed. Run: pip install httpstan"
        )
    return Path(spec.origin).parent


def stanc_path() -> Path:
    """Return a stanc executable without building anything.

    The stanc of ``$CMDSTAN`` when that is set and has one, else the stanc
    shipped in the httpstan wheel.

    Raises
    ------
    FileNotFoundError
        If no stanc executable can be found.
    """
    cmdstan = os.environ.get("CMDSTAN")
    if cmdstan:
        candidate = Path(cmdstan) / "bin" / "stanc"
        if candidate.exists():
            return candidate
    candidate = httpstan_dir() / "stanc"
    if not candidate.exists():
        raise FileNotFoundError(
            f"no stanc executable at {candidate}; reinstall httpstan "
            "(pip install --force-reinstall httpstan) or set CMDSTAN"
        )
    return candidate
