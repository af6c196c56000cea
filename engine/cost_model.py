"""Cost model: a method's time per token and speedup on a profiled device, from its acceptance
profile (docs/cost_model.md has the derivation and its validation on this project's CPU).

Inputs: a trial's iterations per generation (engine/metrics.py IterationStats, stored per
trial as `results.per_iteration`) and the forward-cost curves c_t (target) and c_d (draft) of
the device (`ForwardCurve` below, measured by engine/curves.py, stored in the `profiles` table). For
one generation with a prompt of P tokens and iterations i = 1..I (tree size N_i with the root, draft
forwards F_i feeding D_i tokens, E_i tokens emitted, host time h_i):

    C_i      = P - 1 + sum_{j < i} E_j                      target cache length at iteration i
    T_pre    = c_t(P - 1, 0)                                 target prefill of the prompt
    T_i      = sum_{f=1..F_i} c_d(n_if, C_i) + c_t(N_i, C_i) + h_i
    T_gen    = T_pre + sum_i T_i

Draft forward sizes n_if are not stored, only F_i and D_i: the first iteration's first forward
carries the draft's prefill (the P - 1 prompt tokens before the root, DraftModel.start), every
other token is spread evenly over the F_i forwards:

    n_i1 = pend_i + (D_i - pend_i) / F_i,   n_if = (D_i - pend_i) / F_i  (f > 1)
    pend_i = P - 1 if i = 1 else 0

Autoregressive decoding of the same M = sum_i E_i tokens on the same device:

    T_AR = T_pre + sum_{j=0..M-1} (c_t(1, P - 1 + j) + h_AR)

Over a trial's generations g: time per token = sum_g T_gen / sum_g M_g, and

    speedup = (sum_g T_AR,g / sum_g M_g) / (sum_g T_gen / sum_g M_g) = sum_g T_AR,g / sum_g T_gen

(token-weighted, as the `throughput` metric pools prompts). h_i is the iteration's time
outside model forwards (draft_s - draft_forward_s + target_s - target_forward_s + verify_s +
bookkeeping_s) as the trial measured it, or a per-iteration constant for an engine path on the
predicted device; h_AR likewise from an autoregressive trial (0 when none is known).

Pure Python: no torch, so reports on the driver can predict without the engine's dependencies.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from engine.config import ConfigError

DEFAULT_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
DEFAULT_CONTEXTS: tuple[int, ...] = (128, 512, 1024)
DEFAULT_REPEATS = 3  # timed forwards per point (their median is stored)


@dataclass(frozen=True)
class CurvePoint:
    context: int  # C: tokens already in the KV cache
    n: int  # new tokens in the forward
    seconds: float  # median wall time of one forward


@dataclass(frozen=True)
class ForwardCurve:
    model: str
    device_name: str
    dtype: str  # "float32", "bfloat16", ...
    engine: str  # engine/config.py ENGINE_SPECS
    points: tuple[CurvePoint, ...]

    def contexts(self) -> tuple[int, ...]:
        return tuple(sorted({p.context for p in self.points}))

    def _at_context(self, context: int) -> tuple[list[int], list[float]]:
        pts = sorted((p.n, p.seconds) for p in self.points if p.context == context)
        return [n for n, _ in pts], [s for _, s in pts]

    def cost(self, n: float, context: float) -> float:
        """Seconds of one forward of n new tokens after `context` cached tokens.

        Piecewise linear in n at each measured context, then piecewise linear in C between
        the two measured contexts around it:

            c(n, C) = (1 - w) c(n, C_j) + w c(n, C_{j+1}),   w = (C - C_j) / (C_{j+1} - C_j)

        Outside the measured range: n above the largest size and C above the largest context
        are extrapolated linearly from the last two points (attention and the LM head grow
        linearly in n, attention linearly in C); C below the smallest context is clamped to
        it (the curve there is dominated by the weight reads, not by C); n in (0, 1) costs
        c(1, C) (a forward has a floor), n <= 0 costs 0 (no forward). Fractional n are
        allowed: the cost model splits a forward's tokens evenly where it must.
        """
        if n <= 0:
            return 0.0
        n = max(float(n), 1.0)
        ctx = self.contexts()
        if not ctx:
            raise ValueError(f"forward curve of {self.model} on {self.device_name} is empty")
        if len(ctx) == 1 or context <= ctx[0]:
            return self._cost_n(n, ctx[0])
        j = min(bisect.bisect_right(ctx, context) - 1, len(ctx) - 2)
        lo, hi = ctx[j], ctx[j + 1]
        w = (context - lo) / (hi - lo)  # > 1 past the largest context: linear extrapolation
        a, b = self._cost_n(n, lo), self._cost_n(n, hi)
        return max(a + w * (b - a), 0.0)

    def _cost_n(self, n: float, context: int) -> float:
        ns, secs = self._at_context(context)
        if len(ns) == 1:
            return secs[0] * n / ns[0]
        if n <= ns[0]:
            return secs[0]
        i = min(bisect.bisect_left(ns, n), len(ns) - 1)
        i = max(i, 1)
        n0, n1, s0, s1 = ns[i - 1], ns[i], secs[i - 1], secs[i]
        return max(s0 + (n - n0) * (s1 - s0) / (n1 - n0), 0.0)

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "device_name": self.device_name,
            "dtype": self.dtype,
            "engine": self.engine,
            "points": [[p.context, p.n, p.seconds] for p in self.points],
        }

    @staticmethod
    def from_dict(d: dict) -> ForwardCurve:
        return ForwardCurve(
            model=d["model"],
            device_name=d["device_name"],
            dtype=d["dtype"],
            engine=d["engine"],
            points=tuple(CurvePoint(int(c), int(n), float(s)) for c, n, s in d["points"]),
        )


def parse_ints(text: str, option: str) -> list[int]:
    """A comma-separated list of integers (`--sizes 1,2,4`, or `sizes: "1,2,4"` in a sweep
    file); ConfigError naming `option` when it is not one."""
    try:
        out = [int(t) for t in text.replace(" ", "").split(",") if t]
    except ValueError:
        raise ConfigError(f"{option} expects comma-separated integers, got {text!r}") from None
    if not out:
        raise ConfigError(f"{option} is empty")
    return out


def check_grid(sizes: Sequence[int], contexts: Sequence[int], repeats: int) -> None:
    """Bad sizes or contexts fail here, before any model loads."""
    if not sizes or any(n < 1 for n in sizes):
        raise ConfigError(f"sizes must be integers >= 1, got {list(sizes)}")
    if not contexts or any(c < 0 for c in contexts):
        raise ConfigError(f"contexts must be integers >= 0, got {list(contexts)}")
    if repeats < 1:
        raise ConfigError(f"repeats must be >= 1, got {repeats}")


class Curve(Protocol):
    def cost(self, n: float, context: float) -> float: ...


@dataclass(frozen=True)
class Iteration:
    tree_size: int  # N: nodes fed to the target, the root included
    accepted: int
    emitted: int  # E
    draft_forwards: int  # F
    draft_tokens: int  # D
    host_s: float  # h: time outside model forwards


@dataclass(frozen=True)
class GenerationProfile:
    prompt_tokens: int  # P
    iterations: tuple[Iteration, ...]

    @property
    def new_tokens(self) -> int:
        return sum(it.emitted for it in self.iterations)


@dataclass(frozen=True)
class Prediction:
    seconds: float  # sum_g T_gen
    ar_seconds: float  # sum_g T_AR
    new_tokens: int  # sum_g M_g
    prefill_s: float
    draft_s: float  # draft forwards
    target_s: float  # target forwards after the prefill
    host_s: float

    @property
    def time_per_token(self) -> float:
        return self.seconds / self.new_tokens if self.new_tokens else 0.0

    @property
    def ar_time_per_token(self) -> float:
        return self.ar_seconds / self.new_tokens if self.new_tokens else 0.0

    @property
    def speedup(self) -> float:
        return self.ar_seconds / self.seconds if self.seconds > 0 else 0.0


def host_seconds(stats: Mapping[str, float]) -> float:
    """h: an iteration's time outside model forwards, from its IterationStats fields."""
    return (
        stats["draft_s"]
        - stats["draft_forward_s"]
        + stats["target_s"]
        - stats["target_forward_s"]
        + stats["verify_s"]
        + stats["bookkeeping_s"]
    )


def from_per_iteration(prompt_tokens: int, lists: Mapping[str, Sequence]) -> GenerationProfile:
    """One generation from its stored per-iteration lists ({field: [value per iteration]}, as
    GenerationStats.to_dict and results.per_iteration hold them)."""
    n = len(lists.get("tree_size", ()))
    rows = [{k: v[i] for k, v in lists.items()} for i in range(n)]
    its = tuple(
        Iteration(
            tree_size=int(r["tree_size"]),
            accepted=int(r["accepted"]),
            emitted=int(r["emitted"]),
            draft_forwards=int(r.get("draft_forwards", 0)),
            draft_tokens=int(r.get("draft_tokens", 0)),
            host_s=host_seconds(r),
        )
        for r in rows
    )
    return GenerationProfile(prompt_tokens, its)


def draft_forward_sizes(it: Iteration, pending: int) -> list[float]:
    """n_if: the first forward carries `pending` committed tokens, the rest of the D tokens
    are spread evenly over the F forwards (module docstring)."""
    if it.draft_forwards <= 0:
        return []
    pending = min(pending, it.draft_tokens)
    each = (it.draft_tokens - pending) / it.draft_forwards
    return [pending + each] + [each] * (it.draft_forwards - 1)


def predict(
    generations: Sequence[GenerationProfile],
    target: Curve,
    draft: Curve | None,
    host_ar_s: float = 0.0,
    host_s: float | None = None,
    draft_sizes: Sequence[Sequence[Sequence[float]]] | None = None,
) -> Prediction:
    """Predicted time of the generations and of autoregressive decoding on the curves' device.

    host_s: None takes each iteration's own host time h_i; a number replaces every h_i.
    draft_sizes: exact draft forward sizes [generation][iteration][forward] where they were
    recorded (validation), instead of the split of `draft_forward_sizes`."""
    total = ar = pre = dr = tg = hs = 0.0
    tokens = 0
    for g_i, g in enumerate(generations):
        context = g.prompt_tokens - 1
        prefill = target.cost(context, 0) if context > 0 else 0.0
        pre += prefill
        gen_s, ar_s = prefill, prefill
        for i, it in enumerate(g.iterations):
            if draft_sizes is not None:
                sizes = draft_sizes[g_i][i]
            else:
                sizes = draft_forward_sizes(it, g.prompt_tokens - 1 if i == 0 else 0)
            if sizes and draft is None:
                raise ValueError("iterations with draft forwards need the draft's curve")
            d = sum(draft.cost(n, context) for n in sizes) if sizes else 0.0
            t = target.cost(it.tree_size, context)
            h = it.host_s if host_s is None else host_s
            dr, tg, hs = dr + d, tg + t, hs + h
            gen_s += d + t + h
            for j in range(it.emitted):
                ar_s += target.cost(1, context + j) + host_ar_s
            context += it.emitted
        total, ar, tokens = total + gen_s, ar + ar_s, tokens + g.new_tokens
    return Prediction(total, ar, tokens, pre, dr, tg, hs)


def mean_host_per_token(generations: Sequence[GenerationProfile]) -> float:
    """h_AR from an autoregressive trial: its host time per iteration (one token each)."""
    its = [it for g in generations for it in g.iterations]
    return sum(it.host_s for it in its) / len(its) if its else 0.0
