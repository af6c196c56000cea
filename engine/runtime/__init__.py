"""How a model runs with its KV cache in a generation: `cached_model(model, engine, capacity)` is
the entry. The eager reference (`CachedModel`, eager.py), the fast path's preallocated cache
(`StaticCachedModel`, static.py, over slots.py's `SlotCache`), its padded graph forwards (CUDA
graphs, cuda_graphs.py) and our own forward of Llama / Qwen2 models (`+lean`, lean.py).
"""

from __future__ import annotations

from engine.config import split_engine
from engine.runtime import lean
from engine.runtime.eager import CachedModel
from engine.runtime.static import MIN_CAPACITY, StaticCachedModel

__all__ = ["MIN_CAPACITY", "CachedModel", "StaticCachedModel", "cached_model"]

# the fast paths' cached models live on the model itself, {engine: StaticCachedModel}: a
# reference cycle (each holds its model) that the garbage collector frees with the model. A
# mapping keyed by the model, even a weak one, would keep every model a process ever decoded
# with alive through its entry (a worker running several pairs' trials, one after another).
_CACHED = "_orch_cached_models"


def cached_model(model, engine: str = "eager", capacity: int = MIN_CAPACITY) -> CachedModel:
    """An empty cached model for one generation on the given engine (engine/config.py
    ENGINE_SPECS; ENGINE+lean: on our own forward of the model, engine/runtime/lean.py). The fast
    paths keep one instance per model and reset it, so a buffer is allocated, and a compiled
    graph captured, once per model and size bucket, not per generation."""
    engine, on_lean = split_engine(engine)
    if engine == "eager":
        return CachedModel(model)
    if on_lean:
        model = lean.lean(model)
    per_model = vars(model).setdefault(_CACHED, {})
    if engine not in per_model:
        per_model[engine] = StaticCachedModel(model, capacity, engine)
    lm = per_model[engine]
    lm.reset(capacity)
    return lm
