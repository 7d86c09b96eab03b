"""The package's layers: no module imports a module of a later stage, and the estimators
are pure functions of draws and log weights.

Every import counts, at module level, inside functions and under ``TYPE_CHECKING``
alike: a lazy import of a later stage is still a back arrow.  The stages, in the
order a module may import them (a module imports its own stage and earlier ones):
each names packages, modules or sub-packages by their path under ``pemc_stan``, and a
module belongs to the stage of the longest name that is it or a package holding it.
"""

from __future__ import annotations

import ast as pyast
from collections.abc import Iterator
from pathlib import Path

import pytest

import pemc_stan

PACKAGE = Path(pemc_stan.__file__).resolve().parent

#: The stages of the pipeline, earliest first (``""`` is the root package, the public API).
STAGES: tuple[tuple[str, frozenset[str]], ...] = (
    ("foundations", frozenset({"errors", "_version"})),
    ("CmdStan runtime", frozenset({"backend"})),
    ("Stan front end: text -> AST", frozenset({"stan"})),
    ("a program and its data, read once", frozenset({"inputs", "examples"})),
    ("estimators: pure functions of draws and log weights", frozenset({"estimators"})),
    ("output: verdicts, InferenceData, run folders (fits through their hooks)",
     frozenset({"output"})),
    ("the mode search's rules and record (imports nothing of the package)",
     frozenset({"modes.search"})),
    ("methods' core: the shared model and fit, base densities, templates, options, "
     "registry, follow-ups",
     frozenset({"methods.base", "methods.base_density", "methods.templates",
                "methods.options", "methods.registry", "methods.follow_up",
                "methods.warm_start"})),
    ("modes: the pilot's search, the mode split and its checks, density programs, "
     "bridge sampling", frozenset({"modes"})),
    ("methods: CT and PE, and the package that registers them", frozenset({"methods"})),
    ("the run's plan: search, split or the method's run, follow-ups", frozenset({"plan"})),
    ("front doors: sample, transform, evidence", frozenset({"pipeline", "evidence"})),
    ("many fits on a cluster", frozenset({"batch"})),
    ("the command line and the public API", frozenset({"cli", "__main__", ""})),
)

#: Modules that start processes or run CmdStan; the estimators import none of them.
PROCESS_MODULES = ("subprocess", "multiprocessing", "concurrent", "cmdstanpy", "httpstan",
                   "pemc_stan.backend", "pemc_stan.methods", "pemc_stan.modes",
                   "pemc_stan.plan", "pemc_stan.pipeline", "pemc_stan.evidence")


def _stage_of(module: str) -> int:
    """The stage of ``module`` (``pemc_stan.methods.base``): that of the longest stage
    member that is the module or a package holding it (``""``, the root, holds nothing
    but itself)."""
    rel = module.split(".", 1)[1] if "." in module else ""
    best, found = -1, -1
    for i, (_, members) in enumerate(STAGES):
        for m in members:
            if (rel == m or (m and rel.startswith(m + "."))) and len(m) > best:
                best, found = len(m), i
    if found < 0:
        raise AssertionError(f"{module} is in no stage of tests/test_layers.py: add it")
    return found


def _top(module: str) -> str:
    """``pemc_stan.methods.registry`` -> ``methods``; ``pemc_stan`` -> ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


#: Data the wheel ships as packages (the templates and the gallery's models and scripts),
#: not code of the pipeline; an installed package has them beside its modules.
DATA_PACKAGES = frozenset({"stan_templates", "models"})


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).with_suffix("")
        parts = [p for p in rel.parts if p != "__init__"]
        if parts and parts[0] in DATA_PACKAGES:
            continue
        yield ".".join(["pemc_stan", *parts]), path


def _imports(path: Path) -> Iterator[tuple[str, int]]:
    """Every module a file imports (``from pemc_stan import batch`` imports ``pemc_stan.batch``)."""
    tree = pyast.parse(path.read_text(), str(path))
    for node in pyast.walk(tree):
        if isinstance(node, pyast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, pyast.ImportFrom) and node.module and node.level == 0:
            folder = PACKAGE.joinpath(*node.module.split(".")[1:])
            for alias in node.names:
                if (folder / alias.name).is_dir() or (folder / f"{alias.name}.py").is_file():
                    yield f"{node.module}.{alias.name}", node.lineno  # a submodule
                else:
                    yield node.module, node.lineno


def _violations(name: str, path: Path) -> list[str]:
    """The imports of module ``name`` (file ``path``) that reach a later stage, and its
    relative imports (which the scan could not place)."""
    found = []
    own = _stage_of(name)
    for node in pyast.walk(pyast.parse(path.read_text())):
        if isinstance(node, pyast.ImportFrom) and node.level > 0:
            found.append(f"{path.name}:{node.lineno}: a relative import (write it absolute)")
    for target, line in _imports(path):
        if target != "pemc_stan" and not target.startswith("pemc_stan."):
            continue
        if target == "pemc_stan" and name != "pemc_stan":
            found.append(f"{path.name}:{line}: {name} imports the root package (the public "
                         "API, the last stage)")
            continue
        other = _stage_of(target)
        if other > own:
            found.append(f"{path.name}:{line}: {name} ({STAGES[own][0]}) imports {target} "
                         f"({STAGES[other][0]})")
    return found


def back_arrows() -> list[str]:
    return [v for name, path in _modules() for v in _violations(name, path)]


def test_no_module_imports_a_later_stage() -> None:
    found = back_arrows()
    assert not found, "imports of a later stage:\n" + "\n".join(found)


def test_every_module_is_in_a_stage() -> None:
    for name, _ in _modules():
        _stage_of(name)


def test_estimators_are_pure() -> None:
    """No module under estimators/ imports the methods, the front doors, the CmdStan
    runtime or anything that starts a process, nor calls os.system/os.popen."""
    found = []
    for name, path in _modules():
        if _top(name) != "estimators":
            continue
        for target, line in _imports(path):
            if any(target == m or target.startswith(m + ".") for m in PROCESS_MODULES):
                found.append(f"{path.name}:{line}: imports {target}")
        for node in pyast.walk(pyast.parse(path.read_text())):
            if isinstance(node, pyast.Attribute) and node.attr in ("system", "popen", "fork",
                                                                   "spawnv", "execv"):
                found.append(f"{path.name}:{node.lineno}: calls {pyast.unparse(node)}")
    assert not found, "estimators/ must stay pure:\n" + "\n".join(found)


@pytest.mark.parametrize(("snippet", "module"), [
    ("from pemc_stan.methods import registry\n", "pemc_stan.output.fake"),
    ("def f():\n    from pemc_stan.pipeline import sample\n", "pemc_stan.estimators.fake"),
    ("from pemc_stan import batch\n", "pemc_stan.pipeline"),
    ("from pemc_stan import __version__\n", "pemc_stan.output.fake"),
    ("from . import registry\n", "pemc_stan.methods.fake"),
    # by module: methods' core before the modes, the modes before the method folders
    ("from pemc_stan.modes.split import split_modes\n", "pemc_stan.methods.base"),
    ("from pemc_stan.methods.pseudo_extended import METHOD\n", "pemc_stan.modes.fake"),
    ("from pemc_stan.modes.pilot import BasePilot\n", "pemc_stan.modes.search"),
])
def test_the_scan_sees_a_back_arrow(tmp_path: Path, snippet: str, module: str) -> None:
    """The scans above fail on code like what they forbid."""
    path = tmp_path / "fake.py"
    path.write_text(snippet)
    assert _violations(module, path), snippet


#: The longest a function of the package may be, in lines (docstring included).
MAX_FUNCTION_LINES = 120


def test_no_function_is_longer_than_the_limit() -> None:
    found = []
    for _, path in _modules():
        for node in pyast.walk(pyast.parse(path.read_text())):
            if isinstance(node, (pyast.FunctionDef, pyast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.name} "
                                 f"({length} lines)")
    assert not found, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(found)
