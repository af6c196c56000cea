"""The built-in model names and specs, torch-free so the CLI and the fetcher import them cheaply.

The fetchable real models are `engine.fetch.REAL_MODELS` (with `REAL_PAIR`); engine/models.py
builds the tiny models from the specs here. `HUB_IDS` names the Hugging Face model each real
model is converted from; those ids (with or without the organisation, in any case) are aliases
of the short names: `canonical_name` maps them, so a sweep or `orch generate` may say
`Qwen/Qwen2.5-Coder-1.5B-Instruct` and stores, hashes and loads `qwen2.5-coder-1.5b`.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.shapes import SYNTHETIC_ARCHS


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
    Instruct`, `Qwen2.5-Coder-1.5B-Instruct`, any case); a synthetic model's one spelling
    (`synthetic:qwen2.5-7b@align=0.80,seed=0` -> `synthetic:qwen2.5-7b@align=0.8`); any other
    name unchanged."""
    if not isinstance(name, str):
        return name
    if name.startswith(
        SYNTHETIC_PREFIX
    ):  # one spelling per synthetic model (its defaults left out)
        try:
            return str(parse_synthetic(name))
        except ValueError:
            return name  # refused, with its reason, where the name is checked
    return _ALIASES.get(name.lower(), name)


SYNTHETIC_PREFIX = "synthetic:"


@dataclass(frozen=True)
class SyntheticName:
    """`synthetic:ARCH[@align=A][,seed=S]` (engine/synthetic.py builds it): a random-weight
    model of a published shape (engine/shapes.py) whose greedy next token is the shared
    reference's for a fraction `align` of the vocabulary; models of one `seed` share it."""

    arch: str
    align: float = 1.0
    seed: int = 0

    def __str__(self) -> str:
        opts = ([f"align={self.align!r}"] if self.align != 1.0 else []) + (
            [f"seed={self.seed}"] if self.seed else []
        )
        return SYNTHETIC_PREFIX + self.arch + ("@" + ",".join(opts) if opts else "")


def parse_synthetic(name: str) -> SyntheticName | None:
    """The synthetic model `name` names, None when it is not `synthetic:...`; ValueError
    with one line when it is but is malformed."""
    if not (isinstance(name, str) and name.startswith(SYNTHETIC_PREFIX)):
        return None
    arch, _, opts = name[len(SYNTHETIC_PREFIX) :].partition("@")
    if arch not in SYNTHETIC_ARCHS:
        raise ValueError(
            f"synthetic model {name!r}: unknown shape {arch!r} "
            f"(known: {', '.join(SYNTHETIC_ARCHS)})"
        )
    kw: dict = {}
    for item in filter(None, opts.split(",")):
        key, eq, value = item.partition("=")
        try:
            if not eq or key not in ("align", "seed") or key in kw:
                raise ValueError
            kw[key] = float(value) if key == "align" else int(value)
        except ValueError:
            raise ValueError(
                f"synthetic model {name!r}: options are align=A (0 < A <= 1) and seed=S "
                f"(an integer >= 0), given once each, got {item!r}"
            ) from None
    if not 0.0 < kw.get("align", 1.0) <= 1.0 or kw.get("seed", 0) < 0:
        raise ValueError(f"synthetic model {name!r}: align must be in (0, 1], seed >= 0")
    return SyntheticName(arch, **kw)
