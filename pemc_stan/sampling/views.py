"""What ``f`` sees in ``fit.expectation(f)``: a column's draws by its CmdStan name
(``"omega[2]"``), or a whole parameter's by its name (``"omega"``: an array of its
declared shape after the draws' own axes), so that ``lambda v: v["omega"].max(axis=-1)``
works as it reads."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
from numpy.typing import NDArray

__all__ = ["NamedView", "parameter_values"]


def _index(column: str, name: str) -> tuple[int, ...] | None:
    """The zero-based index of ``column`` (``"m[2,1]"``) within parameter ``name``; None
    when the column is not an element of it."""
    base, bracket, rest = column.partition("[")
    if base != name or not bracket or not rest.endswith("]"):
        return None
    try:
        return tuple(int(i) - 1 for i in rest[:-1].split(","))
    except ValueError:
        return None


def parameter_values(name: str, columns: Iterable[str],
                     get: Callable[[str], NDArray[np.float64]]) -> NDArray[np.float64] | None:
    """Parameter ``name`` whole: its columns' values (``get(column)``) placed by their
    indices after the values' own axes; None when no column is an element of it.

    Raises
    ------
    Nothing beyond ``get``'s errors.
    """
    elements = [(idx, c) for c in columns if (idx := _index(c, name)) is not None]
    if not elements:
        return None
    rank = len(elements[0][0])
    shape = tuple(max(idx[k] for idx, _ in elements) + 1 for k in range(rank))
    first = np.asarray(get(elements[0][1]), dtype=float)
    out: NDArray[np.float64] = np.full(first.shape + shape, np.nan)
    lead = (slice(None),) * first.ndim
    for idx, column in elements:
        out[lead + idx] = get(column)
    return out


class NamedView:
    """``view[key]``: the draws of column ``key``, or of the whole parameter ``key``.

    Parameters
    ----------
    get
        A column's draws by its CmdStan name.
    columns
        The columns there are.
    """

    def __init__(self, get: Callable[[str], NDArray[np.float64]],
                 columns: Iterable[str]) -> None:
        self._get = get
        self._columns = list(dict.fromkeys(columns))
        self._known = set(self._columns)

    def __getitem__(self, key: str) -> NDArray[np.float64]:
        if key in self._known:
            return self._get(key)
        whole = parameter_values(key, self._columns, self._get)
        if whole is None:
            names = sorted({c.split("[")[0] for c in self._columns})
            raise KeyError(f"{key!r} is neither a parameter nor a column of the model: its "
                           f"parameters are {', '.join(names)} (a column is written "
                           "'name[i]' or 'name[i,j]')")
        return whole

    def keys(self) -> list[str]:
        """The columns."""
        return list(self._columns)
