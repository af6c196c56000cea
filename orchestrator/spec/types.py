"""The parsed sweep file (orchestrator/spec/parse.py parses it, orchestrator/spec/expand.py
expands it into trial configs): frozen dataclasses, normalised so that equal sweeps compare and
store alike."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from engine.cost_model import DEFAULT_CONTEXTS, DEFAULT_REPEATS, DEFAULT_SIZES
from orchestrator.spec.limits import DEFAULT, Limits


@dataclass(frozen=True)
class DatasetSel:
    name: str
    prompts: int
    prompt_tokens: int | None = None
    category: str | None = None
    chat: bool | None = None
    # a user's prompt file (orchestrator/spec/sources.py): where the driver reads it, how
    # its rows are read, and its sha256 (stored with the sweep); None for the bundled sets
    path: str | None = None
    field: str | None = None
    category_field: str | None = None
    id_field: str | None = None
    sha256: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """As stored with the sweep: a bundled set's five keys, a file's also its own."""
        return {k: v for k, v in vars(self).items() if v is not None or k in BUNDLED_KEYS}


BUNDLED_KEYS = ("name", "prompts", "prompt_tokens", "category", "chat")


@dataclass(frozen=True)
class MethodSpec:
    name: str
    params: dict[str, Any]
    grid: dict[str, tuple]
    # the method's own draft sampling; None: the sweep's setting
    draft_temperature: float | None = None
    draft_top_p: float | None = None

    def own_sampling(self) -> dict[str, float]:
        """The method's `sampling:` as stored, only the keys it sets."""
        own = {"draft_temperature": self.draft_temperature, "draft_top_p": self.draft_top_p}
        return {k: v for k, v in own.items() if v is not None}

    def draft(
        self, temperature: float | None, top_p: float | None
    ) -> tuple[float | None, float | None]:
        """(draft temperature, draft top-p) of this method's trials at a sweep setting whose
        draft settings are `temperature`, `top_p` (None: the target's)."""
        return (
            temperature if self.draft_temperature is None else self.draft_temperature,
            top_p if self.draft_top_p is None else self.draft_top_p,
        )


@dataclass(frozen=True)
class ProfileSpec:
    """A sweep's `profile:` block: the grid every profile trial measures (engine/curves.py
    measure_curve), sorted and without repeats so that equal grids hash alike."""

    sizes: tuple[int, ...] = DEFAULT_SIZES
    contexts: tuple[int, ...] = DEFAULT_CONTEXTS
    repeats: int = DEFAULT_REPEATS

    def to_dict(self) -> dict[str, Any]:
        """The grid as a profile trial's params (and the stored spec's `profile`)."""
        return {"sizes": list(self.sizes), "contexts": list(self.contexts), "repeats": self.repeats}


@dataclass(frozen=True)
class Sweep:
    name: str
    pairs: tuple[tuple[str, str], ...]
    datasets: tuple[DatasetSel, ...]
    temperatures: tuple[float, ...]  # the temperature x top_p grid (both empty: no grid)
    top_ps: tuple[float, ...]
    max_new_tokens: tuple[int, ...]
    methods: tuple[MethodSpec, ...]
    repeats: int = 1
    seed: int = 0
    warmup: int = 0
    max_attempts: int = 3
    device: str = "auto"
    dtype: str = "auto"  # the target's (and the draft's unless draft_dtype)
    draft_dtype: str | None = None
    engines: tuple[str, ...] = ("eager",)
    description: str = ""
    limits: Limits = DEFAULT
    # explicit (temperature, top_p, draft_temperature, draft_top_p) settings
    points: tuple[tuple[float, float, float | None, float | None], ...] = ()
    draft_temperatures: tuple[float | None, ...] = (None,)  # grid axes; None: the target's
    draft_top_ps: tuple[float | None, ...] = (None,)
    certify: bool = True
    profile: ProfileSpec | None = None  # None: no profile trials
    hardware: tuple[str, ...] = ()  # hardware types, one trial per config each; (): none named
    # (target revision, draft revision) per pair, hub ids only; () when no pair has one
    revisions: tuple[tuple[str | None, str | None], ...] = ()
    placement: dict[str, Any] | None = None  # orchestrator/spec/sources.py placement

    def pair_revisions(self, i: int) -> tuple[str | None, str | None]:
        return self.revisions[i] if self.revisions else (None, None)

    @property
    def settings(self) -> tuple[tuple[float, float, float | None, float | None], ...]:
        """Every (temperature, top_p, draft_temperature, draft_top_p) the sweep runs: the
        grid, then the explicit points."""
        grid = itertools.product(
            self.temperatures, self.top_ps, self.draft_temperatures, self.draft_top_ps
        )
        return tuple(grid) + self.points

    def to_dict(self) -> dict[str, Any]:
        """The normalised spec, JSON-ready (stored with the sweep)."""
        return {
            "name": self.name,
            "description": self.description,
            "pairs": [
                {"target": t, "draft": d} | _revisions(self.pair_revisions(i))
                for i, (t, d) in enumerate(self.pairs)
            ],
            "datasets": [d.to_dict() for d in self.datasets],
            "sampling": {"temperature": list(self.temperatures), "top_p": list(self.top_ps)}
            | ({"points": [_point(x) for x in self.points]} if self.points else {})
            | (  # only when set: the stored spec of a sweep without them is unchanged
                {"draft_temperature": list(self.draft_temperatures)}
                if self.draft_temperatures != (None,)
                else {}
            )
            | ({"draft_top_p": list(self.draft_top_ps)} if self.draft_top_ps != (None,) else {}),
            "max_new_tokens": list(self.max_new_tokens),
            "repeats": self.repeats,
            "seed": self.seed,
            "warmup": self.warmup,
            "max_attempts": self.max_attempts,
            "device": self.device,
            **({"hardware": list(self.hardware)} if self.hardware else {}),
            "dtype": (
                self.dtype
                if self.draft_dtype is None
                else {"target": self.dtype, "draft": self.draft_dtype}
            ),
            "engine": list(self.engines),
            **({} if self.certify else {"certify": False}),
            **({} if self.profile is None else {"profile": self.profile.to_dict()}),
            **({} if self.placement is None else {"placement": dict(self.placement)}),
            "limits": vars(self.limits),
            "methods": [
                {
                    "name": m.name,
                    "params": m.params,
                    "grid": {k: list(v) for k, v in m.grid.items()},
                }
                | ({"sampling": own} if (own := m.own_sampling()) else {})
                for m in self.methods
            ],
        }


def _point(x: tuple) -> list:
    """A stored point: [temperature, top_p] plus the draft's settings where set."""
    return list(x[:2]) if x[2:] == (None, None) else list(x)


def _revisions(revs: tuple[str | None, str | None]) -> dict[str, str]:
    """A stored pair's revisions, only those set (a pair without any is stored as before)."""
    return {f"{role}_revision": r for role, r in zip(("target", "draft"), revs) if r is not None}
