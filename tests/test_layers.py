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

#: The stages of the pipeline, earliest first: the package's folders, in the order a module
#: may import them (a module imports its own folder and earlier ones).  The root package
#: holds only the foundations (errors, the version, log-sum-exp) and the public API (``__init__``,
#: ``__main__``), which comes last.
STAGES: tuple[tuple[str, frozenset[str]], ...] = (
    ("foundations", frozenset({"errors", "_version", "numeric"})),
    ("CmdStan runtime", frozenset({"backend"})),
    ("Stan front end: the program and its data read once, text -> AST",
     frozenset({"stan"})),
    ("estimators: pure functions of draws and log weights", frozenset({"estimators"})),
    ("output: verdicts, InferenceData, run folders (fits through their hooks)",
     frozenset({"output"})),
    ("core: what the methods share with sampling and the search (the transform result, "
     "base coordinates and densities, templates, options, the search's rules)",
     frozenset({"core"})),
    ("sampling: the model and fit every method shares, its checks and follow-ups",
     frozenset({"sampling"})),
    ("modes: the pilot's search, the mode split and its checks, density programs, "
     "bridge sampling, the cells", frozenset({"modes"})),
    ("methods: the registry, CT and PE", frozenset({"methods"})),
    ("a run: the conductor and the front doors (sample, transform, evidence)",
     frozenset({"run"})),
    ("many fits on a cluster", frozenset({"batch"})),
    ("the command line and the public API", frozenset({"cli", "__main__", ""})),
)

#: Modules that start processes or run CmdStan; the estimators import none of them.
PROCESS_MODULES = ("subprocess", "multiprocessing", "concurrent", "cmdstanpy", "httpstan",
                   "pemc_stan.backend", "pemc_stan.methods", "pemc_stan.modes",
                   "pemc_stan.sampling", "pemc_stan.run")


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
     "pemc_stan.run.pipeline"),
])
def test_the_scan_sees_an_import_of_a_method_folder(tmp_path: Path, snippet: str,
                                                    module: str) -> None:
    path = tmp_path / "fake.py"
    path.write_text(snippet)
    assert _folder_leaks(module, path), snippet


@pytest.mark.parametrize(("snippet", "module"), [
    ("from pemc_stan.methods import registry\n", "pemc_stan.output.fake"),
    ("def f():\n    from pemc_stan.run.pipeline import sample\n", "pemc_stan.estimators.fake"),
    ("from pemc_stan import batch\n", "pemc_stan.run.pipeline"),
    ("from pemc_stan import __version__\n", "pemc_stan.output.fake"),
    ("from . import registry\n", "pemc_stan.methods.fake"),
    # by module: methods' core before the modes, the modes before the method folders
    ("from pemc_stan.modes.split import split_modes\n", "pemc_stan.sampling.fit"),
    ("from pemc_stan.methods.pseudo_extended import METHOD\n", "pemc_stan.modes.fake"),
    ("from pemc_stan.modes.pilot import BasePilot\n", "pemc_stan.core.search"),
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


#: The rooms and modules that read fits through their declared hooks only.
HOOK_READERS = ("pemc_stan.output", "pemc_stan.cli", "pemc_stan.run.evidence",
                "pemc_stan.run.evidence_sources")


def _fit_kinds() -> dict[str, str]:
    """Every fit class that is a kind of ``ExtendedFit`` -> the module that defines it."""
    import pemc_stan.run.pipeline  # noqa: F401  (registers the methods, imports their fits)
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
        if name.startswith(HOOK_READERS):
            found += _getattr_on_fits(path)
    assert not found, "getattr on a fit or model:\n" + "\n".join(found)


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


def _module_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (every import, wherever it stands)."""
    names = {name for name, _ in _modules()}
    graph: dict[str, set[str]] = {}
    for name, path in _modules():
        graph[name] = {t for t, _ in _imports(path)
                       if t in names and t != name and t != "pemc_stan"}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: each a path that comes back to where it started."""
    found: list[list[str]] = []
    done: set[str] = set()
    stack: list[str] = []

    def visit(m: str) -> None:
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if d in stack:
                found.append([*stack[stack.index(d):], d])
            elif d not in done:
                visit(d)
        stack.pop()
        done.add(m)

    for m in sorted(graph):
        if m not in done:
            visit(m)
    return found


def test_no_module_imports_itself_through_others() -> None:
    found = circles(_module_graph())
    assert not found, "import circles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_circle_scan_sees_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert not circles({"a": {"b"}, "b": {"c"}, "c": set()})


def reexports(path: Path) -> list[str]:
    """Names in a module's ``__all__`` that it imports from the package instead of
    defining (a package's ``__init__`` may gather its own modules' names)."""
    tree = pyast.parse(path.read_text())
    imported = {a.asname or a.name for node in tree.body if isinstance(node, pyast.ImportFrom)
                and node.module and node.module.startswith("pemc_stan") for a in node.names}
    listed: list[str] = []
    for node in tree.body:
        if isinstance(node, pyast.Assign) and any(
                isinstance(t, pyast.Name) and t.id == "__all__" for t in node.targets):
            listed = [e.value for e in getattr(node.value, "elts", [])
                      if isinstance(e, pyast.Constant) and isinstance(e.value, str)]
    return [n for n in listed if n in imported]


def test_no_module_re_exports_a_name_it_imports() -> None:
    """A name is imported from the module that defines it, never through another (an old
    import path kept alive); only a package's ``__init__`` gathers names."""
    found = [f"{path.relative_to(PACKAGE)}: {', '.join(names)}" for _, path in _modules()
             if path.name != "__init__.py" and (names := reexports(path))]
    assert not found, "modules re-exporting imported names:\n" + "\n".join(found)


def test_the_re_export_scan_sees_one(tmp_path: Path) -> None:
    path = tmp_path / "fake.py"
    path.write_text("from pemc_stan.errors import emit_warning\n__all__ = ['emit_warning']\n")
    assert reexports(path) == ["emit_warning"]


def test_every_module_says_what_it_is() -> None:
    """A module is one idea, said in its docstring's first line."""
    found = [str(path.relative_to(PACKAGE)) for _, path in _modules()
             if not (pyast.get_docstring(pyast.parse(path.read_text())) or "").strip()]
    assert not found, "modules without a docstring:\n" + "\n".join(found)


def test_every_folder_ships() -> None:
    """Every package folder is listed in pyproject.toml (a folder left out is missing from
    the wheel, and every import of it fails on an installed package)."""
    pyproject = (PACKAGE.parent / "pyproject.toml")
    if not pyproject.is_file():
        pytest.skip("no source tree beside the installed package")
    text = pyproject.read_text()
    missing = [".".join(("pemc_stan", *p.parent.relative_to(PACKAGE).parts))
               for p in PACKAGE.rglob("__init__.py")
               if p.parent.relative_to(PACKAGE).parts[:1] not in (("stan_templates",),
                                                                   ("models",))]
    missing = [m for m in missing if f'"{m}"' not in text]
    assert not missing, "package folders missing from pyproject.toml:\n" + "\n".join(missing)
