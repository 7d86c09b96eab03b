"""The bundled example models (the ``models/`` gallery, shipped inside the wheel).

Each example is a folder holding one Stan program and its data; the command
line accepts ``example:NAME`` (or ``example:NAME/DATA``, naming one of the
folder's data files) wherever it takes a ``.stan`` file, so a fresh install
can run the main job without a checkout::

    pemc-stan sample example:bimodal_1d --method ct

In a source checkout the gallery is the top-level ``models/`` folder; an
installed wheel carries the same files as the package ``pemc_stan.models``.
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Example", "PREFIX", "examples", "example", "is_example", "models_root"]

#: How the command line marks an example name.
PREFIX = "example:"


@dataclass(frozen=True)
class Example:
    """A bundled example: its Stan program and data files.

    Attributes
    ----------
    name
        The folder name, e.g. ``"bimodal_1d"``.
    stan_file
        Path of the Stan program.
    data_files
        The folder's data files (``*.json`` holding Stan data), default first.
    readme
        Path of its README (what it demonstrates).
    """

    name: str
    stan_file: Path
    data_files: tuple[Path, ...]
    readme: Path | None

    @property
    def data_file(self) -> Path | None:
        """The default data file (None for a model without data)."""
        return self.data_files[0] if self.data_files else None


def models_root() -> Path:
    """The folder holding the gallery.

    Raises
    ------
    FileNotFoundError
        If neither the installed ``pemc_stan.models`` package nor a source
        checkout's ``models/`` folder is found.
    """
    try:
        root = Path(str(importlib.resources.files("pemc_stan.models")))
        if root.is_dir() and any(root.glob("*/*.stan")):
            return root
    except (ModuleNotFoundError, TypeError):
        pass
    checkout = Path(__file__).resolve().parents[2] / "models"
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError("the bundled example models are missing from this installation; "
                            "reinstall pemc-stan (pip install --force-reinstall pemc-stan)")


_NOT_DATA = {"exact.json", "exact_moments.json", "ground_truth.json"}


def _example(folder: Path) -> Example | None:
    programs = sorted(folder.glob("*.stan"))
    if not programs:
        return None
    named = folder / f"{folder.name}.stan"
    stan = named if named.is_file() else programs[0]
    data = [p for p in sorted(folder.glob("*.json")) if p.name not in _NOT_DATA]
    preferred = [folder / f"{folder.name}.data.json", folder / "data.json"]
    data.sort(key=lambda p: (p not in preferred, p.name))
    readme = folder / "README.md"
    return Example(folder.name, stan, tuple(data), readme if readme.is_file() else None)


def examples() -> dict[str, Example]:
    """All bundled examples by name.

    Raises
    ------
    FileNotFoundError
        As :func:`models_root`.
    """
    found = {}
    for folder in sorted(p for p in models_root().iterdir() if p.is_dir()):
        ex = _example(folder)
        if ex is not None:
            found[ex.name] = ex
    return found


def is_example(spec: str) -> bool:
    """True if ``spec`` names a bundled example (``example:NAME``)."""
    return spec.startswith(PREFIX)


def example(spec: str) -> tuple[Path, Path | None]:
    """Resolve ``example:NAME`` or ``example:NAME/DATA`` to (Stan file, data file).

    Parameters
    ----------
    spec
        ``"example:bimodal_1d"``, ``"example:gaussian_mixture_20/scenario_b"``
        (the data file's name with or without ``.json`` / ``.data.json``), or
        the bare name.

    Returns
    -------
    tuple
        The Stan file and its default (or named) data file.

    Raises
    ------
    KeyError
        For an unknown example or data file; the message lists what exists.
    """
    name = spec[len(PREFIX):] if is_example(spec) else spec
    name, _, data_name = name.partition("/")
    all_examples = examples()
    if name not in all_examples:
        raise KeyError(f"no bundled example {name!r}; the examples are: "
                       f"{', '.join(sorted(all_examples))}")
    ex = all_examples[name]
    if not data_name:
        return ex.stan_file, ex.data_file
    for p in ex.data_files:
        if data_name in (p.name, p.stem, p.name.removesuffix(".data.json")):
            return ex.stan_file, p
    raise KeyError(f"example {name!r} has no data file {data_name!r}; its data files are: "
                   f"{', '.join(p.name for p in ex.data_files) or 'none'}")
