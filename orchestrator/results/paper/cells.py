"""`orch report`'s cell texts and sort keys over plain values (results/values.py json_value):
a setting or parameter as text, numbers at a fixed precision, values of mixed types in one
order."""

from __future__ import annotations

import json
from typing import Any

from orchestrator.results.values import json_value


def vkey(v: Any) -> tuple:
    """A sort key over mixed values: numbers by value, then text, then None."""
    v = json_value(v)
    if v is None:
        return (2, 0.0, "")
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return (0, float(v), "")
    return (1, 0.0, json.dumps(v, sort_keys=True, default=str))


def val(v: Any) -> str:
    """A setting or parameter value as text."""
    v = json_value(v)
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, list):
        return "[" + ",".join(val(x) for x in v) + "]"
    return str(v)


def setting_val(col: str, v: Any) -> str:
    """A setting as text; an unset draft setting is the target's."""
    if col in ("draft_temperature", "draft_top_p", "draft_dtype") and json_value(v) is None:
        return "target's"
    return val(v)


def num(v: Any, digits: int = 3) -> str:
    v = json_value(v)
    return "-" if v is None else f"{v:.{digits}f}"


def params_cell(params: dict[str, Any], names: list[str]) -> str:
    return ", ".join(f"{k}={val(params.get(k))}" for k in names) or "-"
