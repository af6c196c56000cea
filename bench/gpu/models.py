"""Random-weight models with the published shapes, and the bandwidth floor of decoding with them.

Used by the bench.gpu programs: no hub, no weights, only torch and transformers. The shapes
(`ArchSpec`, `ARCHS`) and `build` live in engine/shapes.py; `--tiny` (`ArchSpec.tiny`) keeps the
architecture and shrinks every size, so the whole benchmark runs on a CPU in seconds.
`loaded`, `ar_pair` and `random_prompt` hand them to our engine.

Bandwidth floor of autoregressive decoding (one token per step, batch 1): every step reads each
weight matrix once, the KV cache of the context, and writes one token's keys/values:

    read_bytes(C) = weight_bytes_read + C * kv_bytes_per_token
    floor_s(C)    = read_bytes(C) / bandwidth

weight_bytes_read counts every parameter once (a tied embedding / LM head matrix once), minus
the input embedding table when it is NOT tied to the LM head (a step reads one row of it, not
the table). `bandwidth` is the device's measured copy bandwidth (bytes read + bytes written per
second of a large device-to-device copy), the rate a memory-bound kernel can stream at.
"""

from __future__ import annotations

import torch

from engine.models import LoadedModel, Pair
from engine.shapes import ARCHS, ArchSpec, build  # noqa: F401 - bench.gpu.models.ARCHS etc.
from engine.tokenizers import SyntheticTokenizer

# orch's model names of the same shapes (../shared/MODELS.md: the Coder models' hidden size,
# layers, heads, KV heads; their configs' MLP size, vocabulary and tying match too): a profile
# curve measured here is stored under these names, so `orch compare --predict-on DEVICE`
# finds it for trials of the real pair.
ORCH_TWINS = {"qwen2.5-1.5b": "qwen2.5-coder-1.5b", "qwen2.5-0.5b": "qwen2.5-coder-0.5b"}
# (target, draft): the draft is built with the target's vocabulary size. The first pair has the
# shapes of the real pair the CPU acceptance records were measured with (MODELS.md: the Coder
# models share these shapes); the second is what the same draft gives a 7B target.
PAIRS: dict[str, tuple[str, str]] = {
    "qwen2.5-1.5b/qwen2.5-0.5b": ("qwen2.5-1.5b", "qwen2.5-0.5b"),
    "qwen2.5-7b/qwen2.5-0.5b": ("qwen2.5-7b", "qwen2.5-0.5b"),
}


def weight_bytes_read(model) -> int:
    """Bytes of weights one decoding step reads: every parameter once (`parameters()` yields a
    tied matrix once), minus the input embedding table when it is not the LM head's matrix
    (a step reads one row of it)."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    emb, head = model.get_input_embeddings().weight, model.get_output_embeddings().weight
    if emb is not head:
        total -= emb.numel() * emb.element_size()
    return total


def kv_bytes_per_token(config, dtype: torch.dtype) -> int:
    """Keys and values of one token over all layers."""
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    kv_heads = config.num_key_value_heads or config.num_attention_heads
    return 2 * config.num_hidden_layers * kv_heads * head_dim * torch.finfo(dtype).bits // 8


def floor_seconds(weight_bytes: int, kv_bytes: int, context: float, bandwidth: float) -> float:
    """floor_s(C) = (weight_bytes_read + C * kv_bytes_per_token) / bandwidth (module doc)."""
    if bandwidth <= 0:
        raise ValueError(f"bandwidth must be > 0, got {bandwidth}")
    return (weight_bytes + context * kv_bytes) / bandwidth


class Models:
    """Built models by (name, vocabulary), so a pair's draft with its target's vocabulary is
    its own model, and a model shared by sections is built once."""

    def __init__(self, args, device, dtype) -> None:
        self.args, self.device, self.dtype, self.built = args, device, dtype, {}

    def spec(self, name: str):
        return ARCHS[name].tiny() if self.args.tiny else ARCHS[name]

    def get(self, name: str, vocab: int | None = None):
        key = (name, vocab or self.spec(name).vocab)
        if key not in self.built:  # a seed per architecture: the tiny ones share their shapes
            seed = self.args.seed + list(ARCHS).index(name)
            self.built[key] = build(self.spec(name), self.device, self.dtype, seed, key[1])
        return self.built[key]

    def key(self, name: str, model) -> str:
        """A model's name in the report: a draft padded to its target's vocabulary says so."""
        v = model.config.vocab_size
        return name if v == self.spec(name).vocab else f"{name}@vocab{v}"

    def profile_name(self, name: str, model) -> str:
        """The name its curves are stored under: orch's model of the same shapes where there
        is one (ORCH_TWINS), "<name>-tiny" for toy sizes."""
        key = self.key(name, model)
        if self.args.tiny:
            return f"{key}-tiny"
        return ORCH_TWINS.get(key, key)


def loaded(name: str, model) -> LoadedModel:
    """A built model as our engine loads one (its tokenizer has no EOS: every generation runs
    to max_new_tokens; random weights would emit one at random)."""
    return LoadedModel(
        name=name,
        model=model,
        tokenizer=SyntheticTokenizer(model.config.vocab_size),
        device=model.device,
        dtype=model.dtype,
    )


def stub_draft(model, seed: int):
    """A toy model of `model`'s vocabulary for the draft slot of a Pair decoding
    autoregressively (that drafter never runs the draft; generate still gives it a cache)."""
    spec = ARCHS["llama-2-7b"].tiny()
    return build(spec, model.device, model.dtype, seed, vocab=model.config.vocab_size)


def ar_pair(name: str, model, seed: int) -> Pair:
    """The Pair autoregressive decoding of `model` runs on: it and a stub draft."""
    return Pair(loaded(name, model), loaded("stub", stub_draft(model, seed)))


def random_prompt(model, n: int, seed: int) -> list[int]:
    """n seeded random token ids of `model`'s vocabulary."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(model.config.vocab_size, (n,), generator=gen).tolist()
