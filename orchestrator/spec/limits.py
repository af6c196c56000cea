"""Caps on what a sweep or one generation may ask for, and the rules for stored names.

Caps (README, "Sweeps"): a sweep file may set any of them in a `limits:` block; `orch generate`
uses the defaults. They catch typos that would otherwise allocate gigabytes or run for days
(a 10^7-config grid, a DySpec budget of 1e8), each refused with one line before the database
or any model is touched.

- `max_trials`: trials the grid expands to before de-duplication, computed as a product
  before anything is expanded.
- `max_tree_nodes`: nodes below the root of one draft tree (engine.tree_bounds.max_nodes).
- `max_new_tokens`: new tokens per generation.
- `max_prompts`: prompts per trial.
- `max_warmup`: warmup generations per actor and pair.

Names the database stores (sweep names, model names or folders) must fit their column (the
same limit on SQLite, which would store anything, as on Postgres, which would refuse it) and
hold no control or format characters (terminal escapes, newlines, bidi overrides).
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass, fields
from typing import Any

from db.models import Sweep as SweepRow
from db.models import Trial
from engine.config import ConfigError

NAME_MAX = SweepRow.__table__.c.name.type.length  # 200
MODEL_MAX = Trial.__table__.c.target.type.length  # 200
_CONTROL = ("Cc", "Cf", "Cs", "Co", "Zl", "Zp")


@dataclass(frozen=True)
class Limits:
    max_trials: int = 100_000
    max_tree_nodes: int = 4096
    max_new_tokens: int = 8192
    max_prompts: int = 2000
    max_warmup: int = 100


DEFAULT = Limits()
NAMES = tuple(f.name for f in fields(Limits))


def grid_size(sweep: Any) -> int:
    """Trials of `sweep` (an orchestrator.spec.types.Sweep) before de-duplication, from the lengths
    of its axes: nothing is expanded, so a huge grid costs nothing to measure."""
    per_setting = 0
    for m in sweep.methods:
        points = math.prod(len(v) for v in m.grid.values())
        own = "max_new_tokens" in m.params or "max_new_tokens" in m.grid
        per_setting += points * (1 if own else len(sweep.max_new_tokens))
    profiles = len(sweep.pairs) * len(sweep.engines) if sweep.profile is not None else 0
    per_hardware = max(1, len(sweep.hardware))  # each config once per hardware type
    return per_hardware * profiles + per_hardware * math.prod(
        (
            len(sweep.pairs),
            len(sweep.datasets),
            len(sweep.settings),  # the temperature x top_p grid and the explicit points
            sweep.repeats,
            len(sweep.engines),
            per_setting,
        )
    )


def check_grid(sweep: Any, limits: Limits) -> None:
    n = grid_size(sweep)
    if n > limits.max_trials:
        raise ConfigError(
            f"the sweep expands to {n} trials before de-duplication, more than "
            f"limits.max_trials ({limits.max_trials}); shrink the grid or raise the cap"
        )


def check_tree(method: Any, limits: Limits, in_sweep: bool = True) -> None:
    """ConfigError when `method` (an engine.methods.Method) builds trees above the node cap."""
    from engine.tree_bounds import max_nodes  # lazy: torch

    n, cap = max_nodes(method), limits.max_tree_nodes
    if n > cap:
        what = f"limits.max_tree_nodes ({cap})" if in_sweep else f"the cap of {cap}"
        raise ConfigError(
            f"method {method.name!r} builds draft trees of up to {n} nodes, more than {what}"
        )


def text_problem(value: str, max_len: int) -> str | None:
    """Why `value` cannot be stored as a name, or None."""
    if len(value) > max_len:
        return f"longer than {max_len} characters ({len(value)})"
    for i, ch in enumerate(value):
        if unicodedata.category(ch) in _CONTROL:
            return f"control character {ch!r} at position {i}"
    return None


def check_generate(
    target: str,
    draft: str,
    method: Any,
    prompt_ids: list[int] | None,
    max_new_tokens: int,
    temperature: float,
    device: str,
    limits: Limits = DEFAULT,
) -> None:
    """Everything `orch generate` can check before loading: the device, the caps, prompt ids
    and tree widths against the pair's vocabulary (read from the models' configs)."""
    from engine.devices import check_device  # lazy: torch
    from engine.models import NO_DRAFT, vocab_size  # lazy: torch
    from engine.tree_bounds import check_vocab  # lazy: torch

    check_device(device)
    if max_new_tokens > limits.max_new_tokens:
        raise ConfigError(
            f"--max-new-tokens: {max_new_tokens} is more than the cap of "
            f"{limits.max_new_tokens} new tokens"
        )
    check_tree(method, limits, in_sweep=False)
    names = (target,) if draft == NO_DRAFT else (target, draft)
    known = [(v, n) for n in names if (v := vocab_size(n)) is not None]
    if not known:
        return
    vocab, model = min(known, key=lambda k: k[0])
    for i in prompt_ids or ():
        if not 0 <= i < vocab:
            raise ConfigError(
                f"--prompt-ids: {i} is not a token id of {model} (vocabulary 0..{vocab - 1})"
            )
    check_vocab(method, temperature, vocab, model)
