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
    ("methods' core and sampling: the transform result, base coordinates and densities, "
     "templates, options, the registry; the model and fit every method shares, its checks "
     "and follow-ups",
     frozenset({"methods.result", "methods.coordinates", "methods.coordinate_code",
                "methods.base_density", "methods.templates", "methods.marginalise",
                "methods.options", "methods.registry", "sampling"})),
    ("modes: the pilot's search, the mode split and its checks, density programs, "
     "bridge sampling", frozenset({"modes"})),
    ("methods: CT and PE, and the package that registers them", frozenset({"methods"})),
    ("the run's plan: search, split or the method's run, follow-ups", frozenset({"plan"})),
    ("front doors: sample, transform, evidence (and its estimates from each input)",
     frozenset({"pipeline", "evidence", "evidence_sources"})),
    ("many fits on a cluster", frozenset({"batch"})),
    ("the command line and the public API", frozenset({"cli", "__main__", ""})),
)

#: Modules that start processes or run CmdStan; the estimators import none of them.
PROCESS_MODULES = ("subprocess", "multiprocessing", "concurrent", "cmdstanpy", "httpstan",
                   "pemc_stan.backend", "pemc_stan.methods", "pemc_stan.modes",
                   "pemc_stan.sampling", "pemc_stan.plan", "pemc_stan.pipeline",
                   "pemc_stan.evidence", "pemc_stan.evidence_sources")


def _stage_of(module: str) -> int:
    """The stage of ``module`` (``pemc_stan.methods.registry``): that of the longest stage
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


#: The method folders: each package under ``methods/`` (``continuous_tempering``, ...).
METHOD_FOLDERS = frozenset(p.parent.name for p in (PACKAGE / "methods").glob("*/__init__.py"))

#: The only modules outside a method folder that may import it, and then only its
#: ``__init__``: ``methods/__init__.py`` and ``methods/registry.py`` register the methods,
#: and the root package re-exports their fit and options classes (the public API, whose
#: names must stay static types).
METHOD_FOLDER_IMPORTERS = frozenset({"pemc_stan.methods", "pemc_stan.methods.registry",
                                     "pemc_stan"})


def _folder_of(module: str) -> str | None:
    """``pemc_stan.methods.pseudo_extended.fit`` -> ``pemc_stan.methods.pseudo_extended``;
    None for a module outside every method folder."""
    parts = module.split(".")
    if len(parts) > 2 and parts[:2] == ["pemc_stan", "methods"] and parts[2] in METHOD_FOLDERS:
        return ".".join(parts[:3])
    return None


def _folder_leaks(name: str, path: Path) -> list[str]:
    """The imports of module ``name`` (file ``path``) of a method folder it is not in."""
    found = []
    for target, line in _imports(path):
        folder = _folder_of(target)
        if folder is None or _folder_of(name) == folder:
            continue
        if name in METHOD_FOLDER_IMPORTERS and target == folder:
            continue
        found.append(f"{path.name}:{line}: {name} imports {target}")
    return list(dict.fromkeys(found))  # one line per import, not per name it imports


def test_nothing_outside_a_method_folder_imports_from_it() -> None:
    """What two methods share lives in ``methods/`` itself (e.g. ``methods/tempering.py``),
    not in one method's folder; a folder is reached only through the registry."""
    found = [v for name, path in _modules() for v in _folder_leaks(name, path)]
    assert not found, "imports of another method's folder:\n" + "\n".join(found)


@pytest.mark.parametrize(("snippet", "module"), [
    ("from pemc_stan.methods.continuous_tempering.tempering import FLAT\n",
     "pemc_stan.methods.pseudo_extended.fit"),
    ("from pemc_stan.methods.continuous_tempering import tempering\n", "pemc_stan.sampling.fit"),
    ("from pemc_stan.methods.pseudo_extended.options import BetaDensity\n", "pemc_stan"),
    ("def f():\n    from pemc_stan.methods.pseudo_extended import PseudoExtendedFit\n",
     "pemc_stan.pipeline"),
])
def test_the_scan_sees_an_import_of_a_method_folder(tmp_path: Path, snippet: str,
                                                    module: str) -> None:
    path = tmp_path / "fake.py"
    path.write_text(snippet)
    assert _folder_leaks(module, path), snippet


@pytest.mark.parametrize(("snippet", "module"), [
    ("from pemc_stan.methods import registry\n", "pemc_stan.output.fake"),
    ("def f():\n    from pemc_stan.pipeline import sample\n", "pemc_stan.estimators.fake"),
    ("from pemc_stan import batch\n", "pemc_stan.pipeline"),
    ("from pemc_stan import __version__\n", "pemc_stan.output.fake"),
    ("from . import registry\n", "pemc_stan.methods.fake"),
    # by module: methods' core before the modes, the modes before the method folders
    ("from pemc_stan.modes.split import split_modes\n", "pemc_stan.sampling.fit"),
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


#: The rooms that read fits through their declared hooks only.
HOOK_READERS = ("output", "cli", "evidence", "evidence_sources")


def _fit_kinds() -> dict[str, str]:
    """Every fit class that is a kind of ``ExtendedFit`` -> the module that defines it."""
    import pemc_stan.pipeline  # noqa: F401  (registers the methods, imports their fits)
    from pemc_stan.sampling.fit import ExtendedFit

    kinds: dict[str, str] = {}
    todo = list(ExtendedFit.__subclasses__())
    while todo:
        cls = todo.pop()
        if cls.__module__.startswith("pemc_stan."):
            kinds[cls.__name__] = cls.__module__
        todo.extend(cls.__subclasses__())
    return kinds


def _fit_kind_checks(name: str, path: Path, kinds: dict[str, str],
                     words: frozenset[str]) -> list[str]:
    """``isinstance`` checks on a fit kind defined elsewhere, and comparisons with a string
    that names a kind of run, in one module."""
    found = []
    for node in pyast.walk(pyast.parse(path.read_text())):
        if (isinstance(node, pyast.Call) and isinstance(node.func, pyast.Name)
                and node.func.id == "isinstance" and len(node.args) == 2):
            for ref in pyast.walk(node.args[1]):
                named = ref.id if isinstance(ref, pyast.Name) else (
                    ref.attr if isinstance(ref, pyast.Attribute) else None)
                if named in kinds and kinds[named] != name:
                    found.append(f"{path.name}:{node.lineno}: isinstance(..., {named})")
        if isinstance(node, pyast.Compare):
            for side in (node.left, *node.comparators):
                if isinstance(side, pyast.Constant) and side.value in words:
                    found.append(f"{path.name}:{node.lineno}: compares with {side.value!r}")
    return found


def test_no_room_checks_a_fits_kind_outside_its_own_module() -> None:
    """A fit says what it is through its hooks (``title``, ``own_estimate``, ...): no
    ``isinstance`` on a fit kind outside the module that defines it, and no comparison with
    a string naming a kind of run (the methods' names, ``"mode_split"``) outside the
    registry and the methods' folders."""
    from pemc_stan.methods import registry

    kinds = _fit_kinds()
    assert {"ModeSplitFit", "ContinuousTemperingFit", "PseudoExtendedFit"} <= set(kinds)
    words = frozenset({"mode_split", *(w for m in registry.methods()
                                       for w in (m.name, m.short, m.label))})
    found = []
    for name, path in _modules():
        own = name.startswith(("pemc_stan.methods.continuous_tempering",
                               "pemc_stan.methods.pseudo_extended",
                               "pemc_stan.methods.registry"))
        found += [f for f in _fit_kind_checks(name, path, kinds, words)
                  if not own or "isinstance" in f]
    assert not found, "checks of a fit's kind outside its module:\n" + "\n".join(found)


def _getattr_on_fits(path: Path) -> list[str]:
    """``getattr(x, ...)`` where ``x`` is, or reaches through, a name with fit or model in it."""
    found = []
    for node in pyast.walk(pyast.parse(path.read_text())):
        if (isinstance(node, pyast.Call) and isinstance(node.func, pyast.Name)
                and node.func.id == "getattr" and node.args):
            names = [n.id if isinstance(n, pyast.Name) else n.attr
                     for n in pyast.walk(node.args[0])
                     if isinstance(n, (pyast.Name, pyast.Attribute))]
            if any("fit" in n or "model" in n for n in names):
                found.append(f"{path.name}:{node.lineno}: {pyast.unparse(node)}")
    return found


def test_output_the_cli_and_evidence_read_fits_through_declared_hooks() -> None:
    found = []
    for name, path in _modules():
        if _top(name) in HOOK_READERS:
            found += _getattr_on_fits(path)
    assert not found, "getattr on a fit or model:\n" + "\n".join(found)


#: The share of the package's lines that methods/ may hold.
METHODS_SHARE_MAX = 0.25


def test_the_methods_are_at_most_a_quarter_of_the_package() -> None:
    lines = {name: len(path.read_text().splitlines()) for name, path in _modules()}
    methods = sum(n for name, n in lines.items() if _top(name) == "methods")
    share = methods / sum(lines.values())
    assert share <= METHODS_SHARE_MAX, f"methods/ holds {share:.1%} of the package's lines"


@pytest.mark.parametrize(("snippet", "scan"), [
    ("def f(fit):\n    return getattr(fit, 'search', None)\n", "getattr"),
    ("def f(run):\n    return getattr(run.fit, 'x', 1)\n", "getattr"),
    ("def f(fit):\n    return isinstance(fit, ModeSplitFit)\n", "kind"),
    ("def f(s):\n    return s.get('sampling') == 'mode_split'\n", "kind"),
])
def test_the_hook_scans_see_what_they_forbid(tmp_path: Path, snippet: str, scan: str) -> None:
    path = tmp_path / "fake.py"
    path.write_text(snippet)
    if scan == "getattr":
        assert _getattr_on_fits(path)
    else:
        assert _fit_kind_checks("pemc_stan.output.fake", path, _fit_kinds(),
                                frozenset({"mode_split"}))


#: The longest a module of the package may be, in lines.
MAX_MODULE_LINES = 800


def test_no_module_is_longer_than_the_limit() -> None:
    found = []
    for _, path in _modules():
        rel = path.relative_to(PACKAGE).as_posix()
        length = len(path.read_text().splitlines())
        if length > MAX_MODULE_LINES:
            found.append(f"{rel} ({length} lines)")
    assert not found, f"modules over {MAX_MODULE_LINES} lines:\n" + "\n".join(found)
