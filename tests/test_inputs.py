"""Reading programs: what is reported before anything is compiled (no compilation)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pemc_stan.errors import StanProgramError, UnsupportedConstructError
from pemc_stan.inputs import read_program


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
