"""Values made ready for JSON: what every file of a run folder writes through."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

__all__ = ["json_safe"]


def json_safe(value: Any) -> Any:
    """``value`` with NumPy scalars and arrays, tuples and dataclasses made JSON-ready.

    Non-finite floats become None.

    Raises
    ------
    Nothing (unknown objects become their ``repr``).
    """
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (np.floating, float)):
        v = float(value)
        return v if math.isfinite(v) else None
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return json_safe(dataclasses.asdict(value))
    return repr(value)
