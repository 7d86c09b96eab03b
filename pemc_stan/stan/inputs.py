"""Reading a user's program and data: the one reader of each.

:func:`read_program` turns Stan text, a ``.stan`` path, a
``cmdstanpy.CmdStanModel`` or a parsed :class:`~pemc_stan.stan.ast.Program`
into a :class:`StanProgram` -- the text, the name and the tree, parsed once --
which every later stage (transformation, compilation, reporting,
InferenceData, evidence) takes instead of parsing again.
:func:`load_data` reads data (a mapping or a CmdStan JSON file) and
:func:`check_data` checks it against the data block before anything is
compiled.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import math
import os
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pemc_stan.errors import DataError, PemcStanWarning, StanProgramError
from pemc_stan.stan import ast

if TYPE_CHECKING:
    from pemc_stan.stan.analysis import Analysis

logger = logging.getLogger(__name__)

__all__ = ["StanProgram", "read_program", "load_data", "check_data", "read_data", "CheckedData",
           "ProgramSource", "non_finite_entries"]

#: What a program may be given as.
ProgramSource = Any  # str | os.PathLike[str] | cmdstanpy.CmdStanModel | ast.Program | StanProgram


@dataclass(frozen=True)
class StanProgram:
    """A user's Stan program, read and parsed once.

    Attributes
    ----------
    text
        The program text (what is compiled as the original model).
    name
        The model's name (file stem, the CmdStanModel's name, or ``"model"``).
    tree
        The parsed program.
    path
        The ``.stan`` file it was read from, if any.
    marginalised
        Parameters of ``original`` this program sums out of the model and draws in its
        generated quantities (:mod:`pemc_stan.core.marginalise`); empty for a user's
        program.
    original
        The user's program, when this one was rewritten from it.
    """

    text: str
    name: str
    tree: ast.Program
    path: Path | None = None
    marginalised: tuple[str, ...] = ()
    original: StanProgram | None = None

    @functools.cached_property
    def analysis(self) -> Analysis:
        """Symbol table, dependencies and prior/likelihood classification (computed once).

        Raises
        ------
        UnsupportedConstructError
            For constructs the analysis does not support.
        """
        from pemc_stan.stan.analysis import analyse

        return analyse(self.tree)

    @property
    def parameters(self) -> tuple[tuple[ast.Type, str], ...]:
        """``(declared type, name)`` of every parameter, in declaration order."""
        if self.tree.parameters is None:
            return ()
        return tuple((s.type, d.name) for s in self.tree.parameters.stmts
                     if isinstance(s, ast.VarDecl) for d in s.declarators)

    @property
    def parameter_names(self) -> list[str]:
        """Names of the declared parameters, in order."""
        return [name for _, name in self.parameters]

    def require_parameters(self, purpose: str) -> None:
        """Raise unless the program declares parameters.

        Raises
        ------
        StanProgramError
            Naming the program and ``purpose``.
        """
        if not self.parameters:
            raise StanProgramError(
                f"{self.name} declares no parameters: there is nothing to sample, so the "
                f"{purpose} does not apply", self.name)


def _is_path(source: object) -> bool:
    return isinstance(source, os.PathLike) or (
        isinstance(source, str) and "\n" not in source and source.strip().endswith(".stan"))


def read_program(source: ProgramSource, name: str | None = None) -> StanProgram:
    """Read and parse a program once.

    Parameters
    ----------
    source
        Stan text, a ``.stan`` path, a ``cmdstanpy.CmdStanModel`` (its
        ``stan_file``), a parsed ``ast.Program`` (printed back to text) or a
        :class:`StanProgram` (returned as is, renamed when ``name`` is given).
    name
        The model's name (default: the file stem, or ``"model"``).

    Returns
    -------
    StanProgram

    Raises
    ------
    OSError
        If a path cannot be read.
    ValueError
        For a CmdStanModel without a Stan file.
    StanProgramError
        If stanc or pemc-stan's parser rejects the program.
    """
    from pemc_stan.stan.parser import parse

    if isinstance(source, StanProgram):
        if name is None or name == source.name:
            return source
        return dataclasses.replace(source, name=name)
    if isinstance(source, ast.Program):
        from pemc_stan.stan.printer import print_program

        return StanProgram(print_program(source), name or "model", source)
    import cmdstanpy

    path: Path | None = None
    if isinstance(source, (bytes, bytearray)):
        try:
            source = bytes(source).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise StanProgramError(
                f"the program's bytes are not UTF-8 text (byte {exc.start}): a Stan program "
                "is plain text; pass it as str or as the path of the .stan file",
                name or "model") from None
    if isinstance(source, cmdstanpy.CmdStanModel):
        if source.stan_file is None:
            raise ValueError("the CmdStanModel has no stan_file; pass the program text")
        path = Path(source.stan_file)
        text, default = path.read_text(), source.name
    elif _is_path(source):
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise StanProgramError(
                f"{path} is not a text file (byte {exc.start} is not UTF-8): a Stan program "
                "is plain text; check that the path names the .stan file", path.name) from None
        default = path.stem
    else:
        text, default = str(source), "model"
    name = name or default
    filename = path.name if path is not None else name
    return StanProgram(text, name, parse(text, filename=filename), path)


def load_data(data: Mapping[str, Any] | str | os.PathLike[str] | None) -> dict[str, Any]:
    """The data as a dict: a mapping is copied, a path read as CmdStan JSON, None is ``{}``.

    Raises
    ------
    DataError
        If a file is not valid JSON or does not hold a JSON object.
    OSError
        If a file cannot be read.
    """
    if data is None:
        return {}
    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        try:
            loaded = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise DataError(
                f"data file {path} is not valid JSON: {exc.msg} at line {exc.lineno}, "
                f"column {exc.colno}",
                "write the data as a JSON object {\"name\": value, ...} (CmdStan's JSON data "
                "format)") from None
        if not isinstance(loaded, dict):
            raise DataError(f"data file {path} holds a JSON {type(loaded).__name__}, not an "
                            "object", "write the data as a JSON object {\"name\": value, ...}")
        return loaded
    return dict(data)


def _expected_shape(type_: ast.Type, data: Mapping[str, Any]) -> list[int] | None:
    """Shape a data variable must have, when every size can be evaluated from ``data``."""
    from pemc_stan.stan.evaluate import size_of

    if isinstance(type_, ast.ArrayType):
        inner = _expected_shape(type_.element, data)
        dims = [size_of(d, data) for d in type_.dims]
        if inner is None or any(d is None for d in dims):
            return None
        return [int(d) for d in dims if d is not None] + inner
    if not isinstance(type_, ast.BasicType) or "complex" in type_.name:
        return None
    sizes = [size_of(s, data) for s in type_.sizes]
    if any(s is None for s in sizes):
        return None
    out = [int(s) for s in sizes if s is not None]
    if type_.name in ("cov_matrix", "corr_matrix", "cholesky_factor_corr") or (
            type_.name == "cholesky_factor_cov" and len(out) == 1):
        out = out * 2
    return out


def _plain(value: Any) -> Any:
    """NumPy arrays and scalars, pandas and xarray objects: nested lists and Python numbers."""
    to_numpy = getattr(value, "to_numpy", None)
    if callable(to_numpy):
        value = to_numpy()
    tolist = getattr(value, "tolist", None)
    return tolist() if callable(tolist) else value


def _json_shape(value: Any) -> list[int] | None:
    value = _plain(value)
    shape: list[int] = []
    while isinstance(value, list):
        shape.append(len(value))
        if not value:
            return shape
        value = value[0]
    return shape if isinstance(value, (int, float)) else None


#: Strings CmdStan's JSON reader takes as real numbers.
_NON_FINITE = frozenset({"nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"})


def _leaves(value: Any, index: tuple[int, ...] = ()) -> Iterator[tuple[tuple[int, ...], Any]]:
    """``(index, leaf)`` of a nested list, depth first."""
    value = _plain(value)
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _leaves(item, (*index, i + 1))
    else:
        yield index, value


def _element_type(type_: ast.Type) -> ast.BasicType | None:
    while isinstance(type_, ast.ArrayType):
        type_ = type_.element
    return type_ if isinstance(type_, ast.BasicType) else None


def _bound(expr: ast.Expr | None, data: Mapping[str, Any]) -> float | None:
    from pemc_stan.errors import UnevaluableExpressionError
    from pemc_stan.stan.evaluate import evaluate

    if expr is None:
        return None
    try:
        value = evaluate(expr, data)
    except (UnevaluableExpressionError, TypeError, ValueError, ArithmeticError, LookupError):
        return None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


#: Types whose values CmdStan checks as a whole; NaN fails every such check.
_UNCONSTRAINED = frozenset({"real", "vector", "row_vector", "matrix"})
#: Constrained types whose check an infinite element fails too (a sum, a norm, a
#: factorisation); an ordered vector or a Cholesky factor of a covariance can hold one.
_NO_INFINITY = frozenset({"simplex", "unit_vector", "sum_to_zero_vector", "sum_to_zero_matrix",
                          "column_stochastic_matrix", "row_stochastic_matrix", "corr_matrix",
                          "cov_matrix", "cholesky_factor_corr"})


def _non_finite(leaf: object) -> float | None:
    """``leaf`` as a float when it is NaN or infinite (a float or CmdStan's strings)."""
    if isinstance(leaf, str) and leaf.strip().lower() in _NON_FINITE:
        return float(leaf.strip().lower().replace("infinity", "inf"))
    if isinstance(leaf, float) and not math.isfinite(leaf):
        return leaf
    return None


def _spelled(value: float) -> str:
    return "NaN" if math.isnan(value) else "Inf" if value > 0 else "-Inf"


def _check_values(stmt: ast.VarDecl, name: str, declared: str, data: Mapping[str, Any],
                  data_name: str) -> None:
    """The values of one data variable: numbers of the declared kind, within its bounds.

    NaN and infinite values (floats, or CmdStan's ``"NaN"``/``"Inf"`` strings) are
    refused where CmdStan would reject them -- in an ``int``, against a bound (NaN
    fails every bound check), in a constrained type -- and warned about, once per
    variable, where it accepts them.

    Raises
    ------
    DataError
        Naming the variable, the element and what was expected.
    """
    element = _element_type(stmt.type)
    if element is None or "complex" in element.name:
        return  # tuples and complex numbers: CmdStan checks them
    is_int = element.name == "int"
    bounds = element.constraint if isinstance(element.constraint, ast.Bounds) else None
    lower = _bound(bounds.lower, data) if bounds is not None else None
    upper = _bound(bounds.upper, data) if bounds is not None else None
    where = f"'{declared} {name}' in the data block (line {stmt.line})"
    accepted: list[tuple[str, float]] = []  # non-finite values CmdStan takes
    for index, leaf in _leaves(data[name]):
        at = f"{name}[{','.join(map(str, index))}]" if index else name
        odd = _non_finite(leaf)
        if odd is not None and is_int:
            raise DataError(
                f"{at} in {data_name} is {_spelled(odd)} but {where} holds integers, which "
                "cannot be NaN or infinite",
                f"give \"{name}\" whole numbers, or declare it real if values are missing",
                name)
        if odd is not None and math.isnan(odd) and bounds is not None:
            raise DataError(
                f"{at} in {data_name} is NaN, which fails the bounds of {where} (NaN is "
                "within no bounds)",
                f"replace the NaN in \"{name}\" with a value within the bounds, or leave the "
                "missing value out", name)
        if odd is not None and element.name not in _UNCONSTRAINED and bounds is None and (
                math.isnan(odd) or element.name in _NO_INFINITY
                or (element.name == "positive_ordered" and odd < 0)):
            raise DataError(
                f"{at} in {data_name} is {_spelled(odd)}, which fails CmdStan's "
                f"{element.name} check of {where}",
                f"give \"{name}\" finite values that satisfy the {element.name} constraint",
                name)
        if odd is not None:
            leaf = odd
        if isinstance(leaf, int):  # bool included
            try:
                number: float = float(leaf)
            except OverflowError:
                raise DataError(f"{at} in {data_name} is an integer too large for a number "
                                f"({len(str(leaf))} digits); {where} holds "
                                f"{'32-bit integers' if is_int else 'double-precision numbers'}",
                                f"give \"{name}\" values of a representable size",
                                name) from None
        elif isinstance(leaf, float) and not is_int:
            number = leaf
        else:
            shown = "null" if leaf is None else repr(leaf)
            kind = "whole numbers" if is_int else "numbers"
            got = ("a real number" if isinstance(leaf, float) else "" if leaf is None
                   else "a string" if isinstance(leaf, str) else f"a {type(leaf).__name__}")
            raise DataError(
                f"{at} in {data_name} is {shown}{f' ({got})' if got else ''} but {where} "
                f"holds {kind}",
                f"give \"{name}\" {kind}" + (" written without a decimal point"
                                             if is_int and isinstance(leaf, float) else
                                             "" if is_int else
                                             " (\"NaN\" and \"Inf\" are accepted)"),
                name)
        outside = ((lower is not None and not number >= lower)
                   or (upper is not None and not number <= upper))
        if outside:
            shown = (_spelled(number) if odd is not None
                     else repr(leaf) if not isinstance(leaf, float) else f"{leaf:g}")
            raise DataError(
                f"{at} in {data_name} is {shown}, outside the bounds of {where}",
                f"give \"{name}\" values within the declared bounds, or change the bounds",
                name)
        if odd is not None:
            accepted.append((at, odd))
    if accepted:
        at, first = accepted[0]
        more = (f" (and {len(accepted) - 1} more NaN or infinite value"
                f"{'s' if len(accepted) > 2 else ''} of {name})" if len(accepted) > 1 else "")
        message = (f"{at} in {data_name} is {_spelled(first)}{more}: CmdStan accepts it for "
                   f"{where}, but a density or arithmetic that uses it is NaN or infinite, "
                   "so every draw may be rejected")
        # one channel: a log record at WARNING too would print it twice where logging is
        # not configured (Python's last-resort handler), as errors.emit_warning says
        warnings.warn(message, PemcStanWarning, stacklevel=4)
        logger.debug("warned: %s", message)


def non_finite_entries(data: Mapping[str, Any] | None) -> list[str]:
    """The data's NaN and infinite values, each as ``"y[2] (NaN)"``, in order.

    Raises
    ------
    Nothing.
    """
    found = []
    for name, value in (data or {}).items():
        for index, leaf in _leaves(value):
            odd = _non_finite(leaf)
            if odd is not None:
                at = f"{name}[{','.join(map(str, index))}]" if index else name
                found.append(f"{at} ({_spelled(odd)})")
    return found


def check_data(program: StanProgram | ast.Program, data: Mapping[str, Any],
               data_name: str = "the data") -> None:
    """Check that ``data`` has every data-block variable with the declared shape and values.

    Sizes and bounds are checked where they can be evaluated from the data,
    and every element must be a number of the declared kind (a whole number
    for ``int``; a number or CmdStan's "NaN"/"Inf" strings for reals);
    CmdStan checks the rest (vector constraints such as ``simplex``) when it
    reads the data.

    Raises
    ------
    DataError
        Naming the variable and what was expected.
    """
    from pemc_stan.stan.printer import print_type

    tree = program.tree if isinstance(program, StanProgram) else program
    if tree.data is None:
        return
    for stmt in tree.data.stmts:
        if not isinstance(stmt, ast.VarDecl):
            continue
        declared = print_type(stmt.type)
        for name in stmt.names:
            if name not in data:
                raise DataError(
                    f"{data_name} has no value for '{name}', declared as '{declared} {name}' "
                    f"in the data block (line {stmt.line})",
                    f"add \"{name}\" to {data_name}", name)
            expected = _expected_shape(stmt.type, data)
            got = _json_shape(data[name])
            if expected is None or got is None or 0 in expected:
                continue
            if got != expected:
                raise DataError(
                    f"'{name}' in {data_name} has shape {tuple(got)} but '{declared} {name}' "
                    f"needs shape {tuple(expected)}",
                    f"give \"{name}\" {'x'.join(map(str, expected)) or 'a single'} "
                    "value(s), or fix the sizes it is declared with", name)
        for name in stmt.names:
            _check_values(stmt, name, declared, data, data_name)


class CheckedData(dict[str, Any]):
    """Data already read and checked against :attr:`program` (by :func:`read_data`): read
    again for the same program, it is returned as it is, so each value is checked, and
    warned about, once."""

    def __init__(self, values: Mapping[str, Any], program: StanProgram) -> None:
        super().__init__(values)
        self.program = program


def read_data(program: StanProgram, data: Mapping[str, Any] | str | os.PathLike[str] | None
              ) -> dict[str, Any]:
    """:func:`load_data`, then :func:`check_data` against ``program``: the one data reader
    of the API and the command line, run before anything is compiled.

    Raises
    ------
    DataError
        For unreadable data, or data that do not match the data block.
    OSError
        If a data file cannot be read.
    """
    if isinstance(data, CheckedData) and data.program is program:
        return data
    loaded = load_data(data)
    name = Path(data).name if isinstance(data, (str, os.PathLike)) else "the data"
    check_data(program, loaded, name)
    return CheckedData(loaded, program)
