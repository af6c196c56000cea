"""The built-in model names and specs, torch-free so the CLI and the fetcher import them cheaply.

The fetchable real models are `engine.fetch.REAL_MODELS` (with `REAL_PAIR`); engine/models.py
builds the tiny models from the specs here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TinySpec:
    family: str  # "llama" | "neox"
    layers: int
    draft_of: str | None = None  # target name: draft = its weights plus relative noise
    seed: int = 0
    noise: float = 0.0  # relative std of the noise added to the target's weights


TINY_MODELS = {
    "tiny-llama": TinySpec("llama", layers=4, seed=1234),
    "tiny-llama-draft": TinySpec("llama", layers=4, draft_of="tiny-llama", seed=99, noise=0.03),
    "tiny-neox": TinySpec("neox", layers=4, seed=4321),
    "tiny-neox-draft": TinySpec("neox", layers=4, draft_of="tiny-neox", seed=77, noise=0.05),
}
DEFAULT_PAIR = ("tiny-llama", "tiny-llama-draft")  # target, draft of the CLI and benchmarks
