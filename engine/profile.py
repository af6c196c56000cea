"""A device's forward-cost curve: seconds per forward of n new tokens after a cached context.

    c(n, C) = wall time of one `CachedModel.forward` over n new tokens whose keys/values are
              appended to a KV cache already holding C tokens (logits of all n rows computed,
              as the target's verification and the draft's tree forwards do)

measured for n in `sizes` and C in `contexts`, on the model's device and dtype, through the
engine's own cached-model class (engine/cache.py eager, engine/static_cache.py fast), so what is
timed is what decoding runs: for each C the context is prefilled once with `extend`, then for
each n the forward appends n tokens under a causal (chain) visibility mask - an explicit mask
when n > 1, as a tree's ancestor-only mask is - and `commit([])` drops them again. Each point
is `warmup` untimed forwards then the median of `repeats` timed ones, synchronised on CUDA.

`ForwardCurve.cost(n, C)` interpolates these points (see its docstring); engine/cost_model.py
reads curves to predict a method's time per token on the profiled device.

Needs only torch and transformers: it runs on a GPU box with no database and no Ray. torch is
imported inside the measuring functions: the driver reads stored curves without it.
"""

from __future__ import annotations

import bisect
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.config import ConfigError, split_engine

if TYPE_CHECKING:
    import torch

    from engine.cache import CachedModel

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


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _version(module: str) -> str:
    try:
        return __import__(module).__version__
    except Exception:  # noqa: BLE001 - absent or broken optional library: no version
        return ""


def device_info(device: torch.device | str) -> dict[str, Any]:
    """Who measured: device name (the CPU model from /proc/cpuinfo, or the CUDA device's
    name), driver (CUDA runtime version and the driver's, or ""), torch / transformers /
    triton versions ("" when absent), and cores (CPU threads torch uses; a GPU's SMs)."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        name, cores = torch.cuda.get_device_name(device), int(props.multi_processor_count)
        driver = f"cuda {torch.version.cuda}"
        try:
            major, minor = divmod(torch.cuda.driver_version() // 10, 100)  # e.g. 12040
            driver += f", driver api {major}.{minor}"
        except Exception:  # noqa: BLE001 - older torch: runtime version only
            pass
    else:
        name, driver, cores = _cpu_name(), "", torch.get_num_threads()
    return {
        "device_name": name,
        "driver": driver,
        "torch": torch.__version__,
        "transformers": _version("transformers"),
        "triton": _version("triton"),
        "cores": cores,
        "host": platform.node() or os.uname().nodename,
    }


def cached_factory(engine: str) -> Callable[[torch.nn.Module, int], CachedModel]:
    """model, capacity -> an empty cached model of the given engine (ENGINE_SPECS; ENGINE+lean
    on our own forward of the model, engine/lean_model.py)."""
    path, on_lean = split_engine(engine)
    if path == "eager":
        from engine.cache import CachedModel

        return lambda model, capacity: CachedModel(model)
    from engine.lean_model import lean
    from engine.static_cache import StaticCachedModel

    return lambda model, capacity: StaticCachedModel(
        lean(model) if on_lean else model, capacity, path
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


def _time_forward(lm: CachedModel, tokens, positions, visible) -> float:
    from engine.cache import sync

    sync(lm.device)
    start = time.perf_counter()
    lm.forward(tokens, positions, visible)
    sync(lm.device)
    return time.perf_counter() - start


def measure_curve(
    model,
    name: str,
    sizes: Sequence[int] = DEFAULT_SIZES,
    contexts: Sequence[int] = DEFAULT_CONTEXTS,
    engine: str = "eager",
    repeats: int = DEFAULT_REPEATS,
    warmup: int = 1,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> ForwardCurve:
    """The forward-cost curve of `model` (a loaded transformers causal LM) on its device and
    dtype; `name` is what the curve is stored under. Tokens are drawn from the vocabulary with
    an explicit generator (the cost does not depend on which tokens)."""
    import torch

    check_grid(sizes, contexts, repeats)
    make = cached_factory(engine)
    with torch.inference_mode():
        points = _measure(model, name, make, sizes, contexts, repeats, warmup, seed, log)
    dtype = str(model.dtype).removeprefix("torch.")
    return ForwardCurve(
        name, device_info(model.device)["device_name"], dtype, engine, tuple(points)
    )


def _measure(model, name, make, sizes, contexts, repeats, warmup, seed, log) -> list[CurvePoint]:
    """The curve's points, context by context (see measure_curve)."""
    import torch

    device = model.device
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(seed)
    points = []
    for context in sorted(set(contexts)):
        lm = make(model, context + max(sizes) + 1)
        if context:
            lm.extend(torch.randint(vocab, (context,), generator=gen).tolist())
        for n in sorted(set(sizes)):
            tokens = torch.randint(vocab, (n,), generator=gen).to(device)  # [n]
            positions = torch.arange(context, context + n, device=device)  # [n]
            visible = None
            if n > 1:  # a chain: token i sees the context and tokens 0..i
                visible = torch.ones(n, context + n, dtype=torch.bool)  # [n, C + n]
                visible[:, context:] = torch.ones(n, n, dtype=torch.bool).tril()
                visible = visible.to(device)
            times = []
            for r in range(warmup + repeats):
                t = _time_forward(lm, tokens, positions, visible)
                lm.commit([])  # drop the n appended slots: the context stays C
                if r >= warmup:
                    times.append(t)
            points.append(CurvePoint(context, n, statistics.median(times)))
            if log:
                log(f"{name} C={context} n={n}: {points[-1].seconds * 1e3:.1f} ms")
    return points
