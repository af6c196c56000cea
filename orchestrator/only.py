"""`orch submit | resume --only KEY=V1[,V2...]`: run a cut of a sweep's grid now, the rest later.

The sweep is stored whole (every trial of its grid, pending); a run with `--only` claims only
the trials that match every `--only` given (a trial matches one when its value for KEY is one
of the values listed). The others stay pending for a later `orch resume` or `orch submit`. A
profile trial (the sweep's `profile:` block) runs unless `--only target=` / `draft=` leaves
its pair out (or `--only hardware=` its type).

KEY is one of the trial's own settings (`method`, `target`, `draft`, `dataset`, `temperature`,
`top_p`, `max_new_tokens`, `repeat`, `draft_temperature`, `draft_top_p`, `hardware` (the
sweep's `hardware:` type: `--only hardware=cpu` runs a cross-hardware sweep's cpu trials on the
local executor); a draft setting equal
to the target's is stored as none, so `--only draft_temperature=none` picks the trials whose
draft samples as the target does) or a method parameter (`depth`, `verifier`, `B`, ...): the
resolved value, defaults included, so `--only depth=5` also picks a method whose default depth
is 5; a sweep alias reads the parameter it sets (DynaTree's `depth`, `branch`, `threshold` are
its `D0`, `B_mid`, `tau`). A trial without that parameter (autoregressive has no `depth`)
does not match it: a cut over two methods with different parameters is two runs. Values
compare by meaning: `0.6` matches 0.6, `true` a flag that is on, `[2,1,1]` a list.

An unknown KEY, a value that no trial of the sweep has, or a set of `--only` that no single
trial matches is a ConfigError (one line, exit 2), raised before the database is written to
and before any model loads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

from engine.config import ConfigError

if TYPE_CHECKING:
    from orchestrator.records import TrialConfig

# the trial's own settings --only may name, beside the method's parameters
SETTINGS = ("method", "target", "draft", "dataset", "temperature", "top_p", "max_new_tokens")
SETTINGS += ("repeat", "draft_temperature", "draft_top_p", "hardware")
_MISSING = object()


@dataclass(frozen=True)
class Only:
    key: str
    values: tuple[str, ...]  # as typed; compared by meaning with a trial's value (matches)

    def shown(self) -> str:
        return f"{self.key}={','.join(self.values)}"


def parse_only(texts: Iterable[str]) -> tuple[Only, ...]:
    """`KEY=V1[,V2...]` strings into Only filters; a list value is written in brackets
    (`expansion=[2,1,1],[4,1,1]`): commas inside brackets do not split."""
    out: dict[str, Only] = {}
    for text in texts:
        key, sep, rest = text.partition("=")
        key = key.strip()
        values = tuple(v.strip() for v in _split(rest))
        if not sep or not key or not values or any(not v for v in values):
            raise ConfigError(f"--only expects KEY=V1[,V2...], got {text!r}")
        if key in out:
            raise ConfigError(f"--only {key} given twice; list its values in one: {key}=V1,V2")
        out[key] = Only(key, values)
    return tuple(out.values())


def trial_value(config: TrialConfig, key: str) -> Any:
    """The trial's value for KEY (a setting or a method parameter), or _MISSING. A sweep alias
    a method's config resolves into another parameter (DynaTree's `depth` is `D0`) reads that."""
    if key in SETTINGS:
        return getattr(config, key)
    value = config.params.get(key, _MISSING)
    if value is None:
        from engine.drafters import DRAFTERS  # lazy: torch

        drafter = DRAFTERS.get(config.method)
        target = getattr(drafter.config, "SWEEP_ALIASES", {}).get(key) if drafter else None
        if target is not None:
            return config.params.get(target, _MISSING)
    return value


def value_matches(value: Any, text: str) -> bool:
    """Does the typed TEXT mean the trial's VALUE?"""
    if value is _MISSING:
        return False
    if value is None:
        return text.lower() in ("none", "null")
    if isinstance(value, bool):
        return text.lower() == str(value).lower()
    if isinstance(value, (int, float)):
        try:
            return float(text) == float(value)
        except ValueError:
            return False
    if isinstance(value, (list, tuple, dict)):
        try:
            return json.loads(text) == json.loads(json.dumps(value))
        except ValueError:
            return False
    return text == str(value)


def matches(config: TrialConfig, only: tuple[Only, ...]) -> bool:
    """True when the trial matches every filter (always, with none). A profile trial (a
    sweep's `profile:` block) measures a pair on a device, not a method: only `target`,
    `draft` and `hardware` pick it."""
    if config.is_profile:
        only = tuple(o for o in only if o.key in ("target", "draft", "hardware"))
    return all(any(value_matches(trial_value(config, o.key), v) for v in o.values) for o in only)


def check_only(only: tuple[Only, ...], trials: list[TrialConfig], sweep: str) -> int:
    """ConfigError unless every key and value names something in the sweep's trials and at
    least one trial matches them all; returns how many trials match."""
    runs = [t for t in trials if not t.is_profile]
    for o in only:
        present = [trial_value(t, o.key) for t in runs]
        present = [v for v in present if v is not _MISSING]
        if not present:
            keys = sorted({k for t in runs for k in t.params} | set(SETTINGS))
            raise ConfigError(
                f"--only {o.shown()}: no trial of sweep {sweep!r} has {o.key!r}; "
                f"keys: {', '.join(keys)}"
            )
        for v in o.values:
            if not any(value_matches(p, v) for p in present):
                seen = sorted({_shown(p) for p in present})
                raise ConfigError(
                    f"--only {o.shown()}: no trial of sweep {sweep!r} has {o.key}={v}; "
                    f"its values: {', '.join(seen[:20])}{' ...' if len(seen) > 20 else ''}"
                )
    n = sum(matches(t, only) for t in runs)
    if not n:
        shown = " ".join(f"--only {o.shown()}" for o in only)
        raise ConfigError(f"{shown}: no trial of sweep {sweep!r} matches them all")
    return n


def _shown(value: Any) -> str:
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _split(text: str) -> list[str]:
    """Split on commas outside brackets."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out
