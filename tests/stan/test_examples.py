"""The bundled examples (``example:NAME`` on the command line)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pemc_stan.stan import examples
from pemc_stan.stan.parser import parse

ROOT = Path(__file__).resolve().parents[2]


def test_every_gallery_folder_is_an_example() -> None:
    folders = {p.name for p in (ROOT / "models").iterdir()
               if p.is_dir() and not p.name.startswith((".", "_")) and list(p.glob("*.stan"))}
    assert set(examples.examples()) == folders


@pytest.mark.parametrize("name", sorted(examples.examples()))
def test_example_program_parses_and_data_matches(name: str) -> None:
    stan, data = examples.example(f"example:{name}")
    program = parse(stan.read_text(), filename=stan.name)
    declared = {n for s in (program.data.stmts if program.data else ())
                for n in getattr(s, "names", ())}
    if declared:
        assert data is not None, name
        assert declared <= set(json.loads(data.read_text())), name


def test_default_and_named_data_files() -> None:
    stan, data = examples.example("example:gaussian_mixture_20")
    assert stan.name == "gaussian_mixture_20.stan"
    assert data is not None and data.name == "scenario_a.data.json"
    _, data_b = examples.example("example:gaussian_mixture_20/scenario_b")
    assert data_b is not None and data_b.name == "scenario_b.data.json"
    _, data_n = examples.example("normal_normal")
    assert data_n is not None and data_n.name == "data.json"


def test_unknown_example_lists_the_names() -> None:
    with pytest.raises(KeyError, match="bimodal_1d"):
        examples.example("example:no_such_model")
    with pytest.raises(KeyError, match="scenario_a.data.json"):
        examples.example("example:gaussian_mixture_20/scenario_z")


def test_cli_transforms_an_example_from_another_directory(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "pemc_stan", "transform", "example:bimodal_1d",
                          "--method", "pe", "--n-pseudo", "3"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Pseudo-extended version of bimodal_1d" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "pemc_stan", "transform", "example:nope",
                          "--method", "pe"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 3
    assert "no bundled example 'nope'" in bad.stderr
