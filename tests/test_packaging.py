"""The installed package carries its data files (templates, C++ sources, grammar)."""

from __future__ import annotations

import importlib.resources

from pemc_stan.backend import runtime


def test_stan_templates_ship_as_a_package() -> None:
    templates = importlib.resources.files("pemc_stan.stan_templates")
    assert templates.is_dir()


def test_cpp_sources_and_makefile_ship() -> None:
    compat = importlib.resources.files("pemc_stan.backend.cmdstan_compat")
    for name in ("makefile.in", "driver.cpp", "stansummary.cpp", "diagnose.cpp", "csv_tools.hpp"):
        assert compat.joinpath(name).is_file(), name


def test_grammar_and_type_marker_ship() -> None:
    assert importlib.resources.files("pemc_stan.stan").joinpath("stan.lark").is_file()
    assert importlib.resources.files("pemc_stan").joinpath("py.typed").is_file()


def test_build_ingredients_cover_every_cpp_source(monkeypatch) -> None:
    """Changing any C++ source, the makefile or an extra header changes the build's key."""
    key = runtime.build_ingredients()["sources_sha256"]
    real = runtime._package_file
    names = ["makefile.in", *runtime._CPP_SOURCES, *runtime._extra_headers()]
    for name in names:
        monkeypatch.setattr(runtime, "_package_file",
                            lambda n, changed=name: real(n) + (b" " if n == changed else b""))
        assert runtime.build_ingredients()["sources_sha256"] != key, name
    monkeypatch.setattr(runtime, "_package_file", real)
    assert runtime.build_ingredients()["sources_sha256"] == key


def test_models_gallery_ships_as_a_package() -> None:
    models = importlib.resources.files("pemc_stan.models")
    assert models.joinpath("bimodal_1d", "bimodal_1d.stan").is_file()
    assert models.joinpath("README.md").is_file()


def test_sources_name_no_development_machine_paths_or_issue_numbers() -> None:
    import re
    from pathlib import Path

    import pemc_stan

    package = Path(pemc_stan.__file__).resolve().parent
    pattern = re.compile(r"/work/|/home/|/root/|\(issue \d+\)")
    found = [f"{p.relative_to(package)}:{i}" for p in sorted(package.rglob("*.py"))
             for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not found, found
