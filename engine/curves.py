"""A device's forward-cost curve: seconds per forward of n new tokens after a cached context.

    c(n, C) = wall time of one `CachedModel.forward` over n new tokens whose keys/values are
              appended to a KV cache already holding C tokens (logits of all n rows computed,
              as the target's verification and the draft's tree forwards do)

measured for n in `sizes` and C in `contexts`, on the model's device and dtype, through the
engine's own cached-model class (engine/runtime/eager.py eager, engine/runtime/static.py fast), so
what is timed is what decoding runs: for each C the context is prefilled once with `extend`, then
for each n the forward appends n tokens under a causal (chain) visibility mask - an explicit mask
when n > 1, as a tree's ancestor-only mask is - and `commit([])` drops them again. Each point
is `warmup` untimed forwards then the median of `repeats` timed ones, synchronised on CUDA.

The curve is engine/cost_model.py's `ForwardCurve` (whose `cost(n, C)` interpolates these
points), which the cost model reads to predict a method's time per token on the profiled
device; that module, not this one, is what the driver imports to read stored curves.

Needs only torch and transformers: it runs on a GPU box with no database and no Ray.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from engine.config import split_engine
from engine.cost_model import (
    DEFAULT_CONTEXTS,
    DEFAULT_REPEATS,
    DEFAULT_SIZES,
    CurvePoint,
    ForwardCurve,
    check_grid,
)
from engine.runtime.eager import CachedModel, sync
from engine.runtime.eagle_head import EagleHead
from engine.runtime.eagle_views import HeadAsLM
from engine.runtime.lean import lean
from engine.runtime.static import StaticCachedModel


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
    on our own forward of the model, engine/runtime/lean.py)."""
    path, on_lean = split_engine(engine)
    if path == "eager":
        return lambda model, capacity: CachedModel(model)
    return lambda model, capacity: StaticCachedModel(
        lean(model) if on_lean else model, capacity, path
    )


def _time_forward(lm: CachedModel, tokens, positions, visible) -> float:
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
    """The forward-cost curve of `model` (a loaded transformers causal LM, or an EAGLE head:
    engine/runtime/eagle_views.py HeadAsLM) on its device and dtype; `name` is what the curve
    is stored under. Tokens are drawn from the vocabulary with an explicit generator (the cost
    does not depend on which tokens)."""
    check_grid(sizes, contexts, repeats)
    make = cached_factory(engine)
    if isinstance(model, EagleHead):  # an EAGLE draft: its own forwards, on every engine path
        make = lambda head, capacity: HeadAsLM(head)  # noqa: E731
    with torch.inference_mode():
        points = _measure(model, name, make, sizes, contexts, repeats, warmup, seed, log)
    dtype = str(model.dtype).removeprefix("torch.")
    return ForwardCurve(
        name, device_info(model.device)["device_name"], dtype, engine, tuple(points)
    )


def _measure(model, name, make, sizes, contexts, repeats, warmup, seed, log) -> list[CurvePoint]:
    """The curve's points, context by context (see measure_curve)."""
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
