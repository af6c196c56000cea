"""Strict values of a sweep file (orchestrator/spec/parse.py): each check returns the value at
`where` (the file and key path) with the type it must already have in the YAML (no string ->
number coercion), or raises SpecError, one line naming the path."""

from __future__ import annotations

import math
import re
import types
import typing
from typing import Any, Literal

from engine.config import ConfigError

_YAML11_FLOAT = re.compile(r"^[-+]?\d+(\.\d*)?[eE][-+]?\d+$")  # `1e-2` is a string in YAML 1.1


class SpecError(ConfigError):
    """The sweep file is invalid; the message names the file and the offending path."""


def check_type(value: Any, tp: Any, where: str) -> None:
    """YAML values must already have the annotated type (no string -> number coercion)."""
    origin = typing.get_origin(tp)
    if origin is Literal:
        if value not in typing.get_args(tp):
            choices = ", ".join(map(str, typing.get_args(tp)))
            raise SpecError(f"{where}: {value!r} is not one of {choices}")
    elif origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is not None and len(args) == 1:
            check_type(value, args[0], where)
        elif value is not None:  # X | Literal[...]: the first alternative it checks as
            errors = []
            for arg in args:
                try:
                    return check_type(value, arg, where)
                except SpecError as e:
                    errors.append(str(e).removeprefix(f"{where}: "))
            raise SpecError(f"{where}: {value!r} is none of: {'; '.join(errors)}")
    elif origin is tuple:
        if not isinstance(value, list):
            raise SpecError(f"{where}: expected a list, got {value!r}")
        item = [a for a in typing.get_args(tp) if a is not Ellipsis][0]
        for v in value:
            check_type(v, item, where)
    elif tp is bool:
        boolean(value, where)
    elif tp is int:
        integer(value, where)
    elif tp is float:
        number(value, where)
    elif tp is str:
        string(value, where)


def mapping(
    value: Any,
    where: str,
    required: tuple[str, ...] = (),
    optional: tuple[str, ...] | None = None,
    root: bool = False,
) -> dict:
    if not isinstance(value, dict):
        raise SpecError(f"{where}: expected a mapping, got {shown(value)}")
    if optional is not None:
        known = required + optional
        for key in value:
            if key not in known:
                path = f"{where}: {key}" if root else f"{where}.{key}"
                raise SpecError(f"{path}: unknown key (known: {', '.join(known)})")
    for key in required:
        if key not in value:
            raise SpecError(f"{where}: missing required key {key!r}")
    return value


def nonempty_list(value: Any, where: str) -> list:
    if not isinstance(value, list):
        raise SpecError(f"{where}: expected a list, got {shown(value)}")
    if not value:
        raise SpecError(f"{where}: empty list (give at least one entry)")
    return value


def temperature(value: Any, where: str) -> float:
    return number(value, where, lo=0.0)


def top_p(value: Any, where: str) -> float:
    return number(value, where, lo=0.0, hi=1.0, lo_open=True)


def or_none(check):
    """A check that lets null through (a draft setting: null = the target's)."""
    return lambda value, where: None if value is None else check(value, where)


def axis(value: Any, where: str, check) -> tuple:
    if isinstance(value, list):
        return tuple(check(v, f"{where}[{j}]") for j, v in enumerate(nonempty_list(value, where)))
    return (check(value, where),)


def string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise SpecError(f"{where}: expected a string, got {shown(value)}")
    return value


def boolean(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(f"{where}: expected true or false, got {shown(value)}")
    return value


def integer(
    value: Any, where: str, lo: int | None = None, hi: int | None = None, cap: str = ""
) -> int:
    """An integer in [lo, hi]; `cap` names where `hi` comes from (a limits key)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"{where}: expected an integer, got {shown(value)}")
    if lo is not None and value < lo:
        raise SpecError(f"{where}: must be >= {lo}, got {value}")
    if hi is not None and value > hi:
        raise SpecError(f"{where}: must be <= {hi}{f' ({cap})' if cap else ''}, got {value}")
    return value


def number(
    value: Any, where: str, lo: float | None = None, hi: float | None = None, lo_open: bool = False
) -> float:
    if isinstance(value, str) and _YAML11_FLOAT.match(value):
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(f"{where}: expected a number, got {shown(value)}")
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an int too large for a float
        finite = False
    if not finite:
        raise SpecError(f"{where}: must be a finite number, got {shown(value)}")
    if lo is not None and (value < lo or (lo_open and value == lo)):
        raise SpecError(f"{where}: must be {'>' if lo_open else '>='} {lo}, got {value}")
    if hi is not None and value > hi:
        raise SpecError(f"{where}: must be <= {hi}, got {value}")
    return float(value)


def shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
