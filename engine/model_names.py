"""The built-in model names and specs, torch-free so the CLI and the fetcher import them cheaply.

The fetchable real models are `engine.fetch.REAL_MODELS` (with `REAL_PAIR`); engine/models.py
builds the tiny models from the specs here. `HUB_IDS` names the Hugging Face model each real
model is converted from; those ids (with or without the organisation, in any case) are aliases
of the short names: `canonical_name` maps them, so a sweep or `orch generate` may say
`Qwen/Qwen2.5-Coder-1.5B-Instruct` and stores, hashes and loads `qwen2.5-coder-1.5b`.
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

# short name -> the Hugging Face model it is (engine.fetch converts its GGUF release)
HUB_IDS = {
    "qwen2.5-coder-1.5b": "Qwen/Qwen2.5-Coder-1.5B-Instruct",
    "qwen2.5-coder-0.5b": "Qwen/Qwen2.5-Coder-0.5B-Instruct",
}
_ALIASES = {
    alias.lower(): short
    for short, hub_id in HUB_IDS.items()
    for alias in (hub_id, hub_id.split("/", 1)[1])
}


def canonical_name(name: str) -> str:
    """The short name of a real model given by its Hugging Face id (`Qwen/Qwen2.5-Coder-1.5B-
    Instruct`, `Qwen2.5-Coder-1.5B-Instruct`, any case); any other name unchanged."""
    return _ALIASES.get(name.lower(), name) if isinstance(name, str) else name
