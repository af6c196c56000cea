"""Frame cells as plain Python, two ways: `cell_value` for a cell that is compared, keyed or
printed as it is, `json_value` for one that is also written as JSON text (tuples as lists)."""

from __future__ import annotations

import math
from typing import Any


def cell_value(v: Any) -> Any:
    """A cell as plain Python: numpy scalars -> Python, NaN -> None."""
    if hasattr(v, "item") and not isinstance(v, (list, dict, str)):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def json_value(v: Any) -> Any:
    """cell_value, with a tuple as a list (JSON's shape): `orch report`'s config keys, sort
    keys and cell texts."""
    v = cell_value(v)
    return list(v) if isinstance(v, tuple) else v
