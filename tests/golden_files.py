"""Golden files of generated programs (imported by the transform tests as ``golden_files``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

#: Set to 1 to rewrite the golden files from the current transformations.
REGENERATE = "PEMC_REGENERATE_GOLDEN"


def check_golden(path: Path, code: str) -> None:
    """Assert that ``code`` is the golden file ``path`` byte for byte.

    With ``PEMC_REGENERATE_GOLDEN=1`` a golden file that differs (or is missing) is
    rewritten and the test fails naming it, so a regeneration never passes silently: the
    run's failures list the files it changed, to review and commit; an unchanged file
    passes.
    """
    if os.environ.get(REGENERATE) == "1":
        if not path.exists() or path.read_text() != code:
            path.write_text(code)
            pytest.fail(f"regenerated {path}: review its diff, commit it, and rerun the tests "
                        f"without {REGENERATE}")
        return
    assert path.exists(), f"missing golden file {path}; regenerate it with {REGENERATE}=1"
    assert code == path.read_text(), f"{path} differs; if the change is intended, " \
        f"regenerate with {REGENERATE}=1 and review the diff"
