"""Strict parsing of method parameters into frozen config dataclasses, once, at the edge.

Values arrive as strings from the CLI (`--param depth=4`) or typed from YAML; both go through
`parse_config`, which rejects unknown names and values of the wrong type with one clear line.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any, Literal


class ConfigError(ValueError):
    """Bad user input (unknown method, parameter, wrong type, ...): one line, no traceback."""


# Field metadata of a method parameter added after its method was first released: at its
# default it is left out of the resolved parameters (engine/methods.py method_params), so the
# trials stored before it existed keep their config hashes (orchestrator/records.py).
ADDED_LATER = {"omit_at_default": True}

# how a trial runs its models (engine/runtime/static.py): "eager" is the reference (a growing
# DynamicCache, masks from the host); "fast" a preallocated cache compacted in place with masks
# built on the device; "compiled" the fast path under torch.compile (CUDA graphs on CUDA);
# "graphs" the fast path's forwards recorded as CUDA graphs from its eager kernels, no compiler
# (engine/runtime/cuda_graphs.py; on a CPU the same padded forwards without graphs)
ENGINES = ("eager", "fast", "compiled", "graphs")
# ENGINE+lean: a static-cache engine path on our own forward of a Llama / Qwen2 model
# (engine/runtime/lean.py) instead of Hugging Face's; a trial's `engine` is one of ENGINE_SPECS
ENGINE_SPECS = ENGINES + tuple(f"{e}+lean" for e in ENGINES if e != "eager")
# the engines whose forwards are padded to size buckets and replayed as graphs
PADDED = ("compiled", "graphs")


def split_engine(spec: str) -> tuple[str, bool]:
    """(engine path, on our own forward) of an engine spec, e.g. ("graphs", True) for
    "graphs+lean"; ConfigError for anything else."""
    if spec not in ENGINE_SPECS:
        raise ConfigError(f"engine: {spec!r} is not one of {', '.join(ENGINE_SPECS)}")
    path, _, impl = spec.partition("+")
    return path, bool(impl)


def config_fields(cls: type) -> dict[str, Any]:
    """name -> resolved type annotation of a config dataclass."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def coerce(value: Any, tp: Any, where: str) -> Any:
    """Convert a CLI string or YAML value to the annotated type, or raise ConfigError."""
    origin = typing.get_origin(tp)
    if origin is Literal:
        choices = typing.get_args(tp)
        if value in choices:
            return value
        raise ConfigError(f"{where}: {value!r} is not one of {', '.join(map(str, choices))}")
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) < len(typing.get_args(tp)) and (
            value is None or (isinstance(value, str) and value.lower() in ("none", "null"))
        ):
            return None
        errors = []
        for arg in args:  # the first alternative the value parses as (X | Literal[...])
            try:
                return coerce(value, arg, where)
            except ConfigError as e:
                errors.append(str(e).removeprefix(f"{where}: "))
        raise ConfigError(f"{where}: {value!r} is none of: {'; '.join(errors)}")
    if origin is tuple:
        (item,) = {a for a in typing.get_args(tp) if a is not Ellipsis}
        if isinstance(value, str):
            value = [v for v in value.replace("[", "").replace("]", "").split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        return tuple(coerce(v, item, where) for v in value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "false", "0", "no"):
            return value.lower() in ("true", "1", "yes")
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    if tp is int:
        if isinstance(value, bool):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
        raise ConfigError(f"{where}: expected an integer, got {value!r}")
    if tp is float:
        number = None
        if isinstance(value, (int, float, str)) and not isinstance(value, bool):
            try:
                number = float(value)
            except (ValueError, OverflowError):
                pass
        if number is None:
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        if not math.isfinite(number):
            raise ConfigError(f"{where}: expected a finite number, got {value!r}")
        return number
    if tp is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{where}: expected a string, got {value!r}")
    raise TypeError(f"unsupported config field type {tp!r} at {where}")


def parse_config(cls: type, params: dict[str, Any], where: str = "") -> Any:
    """Build config dataclass `cls` from `params`; unknown or mistyped names raise ConfigError.

    Dataclass `__post_init__` range checks raising ValueError are reported as ConfigError.
    """
    fields = config_fields(cls)
    prefix = f"{where}: " if where else ""
    unknown = sorted(set(params) - set(fields))
    if unknown:
        known = ", ".join(fields) or "none"
        raise ConfigError(f"{prefix}unknown parameter {unknown[0]!r} (known: {known})")
    values = {k: coerce(v, fields[k], f"{prefix}parameter {k!r}") for k, v in params.items()}
    try:
        return cls(**values)
    except ConfigError:
        raise
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{prefix}{e}") from None


def parse_key_values(pairs: typing.Iterable[str]) -> dict[str, str]:
    """['depth=4', 'branch=2'] -> {'depth': '4', 'branch': '2'}."""
    out = {}
    for item in pairs:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--param expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out
