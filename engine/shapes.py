"""Published model shapes, and random-weight models built from them (no hub, no weights).

Each `ArchSpec` holds the shape numbers of a published config.json (hidden size, layers, heads,
KV heads, MLP size, vocabulary, tied embeddings, RoPE base); `build` makes a transformers model
from it with seeded random weights directly on the device, in the chosen dtype. `ArchSpec.tiny`
keeps the architecture and shrinks every size, so a benchmark of the shapes runs on a CPU in
seconds. Users: bench/gpu (forward costs at real shapes) and engine/synthetic.py (aligned
synthetic pairs, `synthetic:ARCH` model names). `TOY_ARCHS` are CPU-sized shapes of the same
families for the synthetic pairs' tests and the cost-model check on this machine.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class ArchSpec:
    family: str  # "qwen2" | "llama"
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    tied: bool  # input embedding shared with the LM head
    rope_theta: float
    max_positions: int
    rms_eps: float

    def tiny(self) -> ArchSpec:
        """The same architecture (family, GQA or not, tying) at toy sizes: 2 layers, hidden
        64, 4 heads, a 512-token vocabulary."""
        return replace(
            self,
            hidden=64,
            layers=min(self.layers, 2),
            heads=4,
            kv_heads=4 if self.kv_heads == self.heads else 2,
            intermediate=160,
            vocab=512,
            max_positions=4096,
        )

    def config(self, vocab: int | None = None, tied: bool | None = None) -> Any:
        """A transformers config; `vocab` overrides the vocabulary (a draft padded to its
        target's embedding size, as Qwen2.5 checkpoints of one tokenizer are), `tied` the
        tying of the input embedding and the LM head."""
        from transformers import LlamaConfig, Qwen2Config  # lazy: transformers

        common = dict(
            vocab_size=vocab or self.vocab,
            hidden_size=self.hidden,
            intermediate_size=self.intermediate,
            num_hidden_layers=self.layers,
            num_attention_heads=self.heads,
            num_key_value_heads=self.kv_heads,
            max_position_embeddings=self.max_positions,
            rms_norm_eps=self.rms_eps,
            rope_theta=self.rope_theta,
            tie_word_embeddings=self.tied if tied is None else tied,
            bos_token_id=None,
            eos_token_id=None,  # random weights: no token ends a generation early
            pad_token_id=None,
        )
        if self.family == "qwen2":
            return Qwen2Config(**common)
        return LlamaConfig(**common)

    def model_type(self) -> str:
        return "qwen2" if self.family == "qwen2" else "llama"


# Published configs (config.json of each checkpoint on the Hugging Face hub; llama-68m is
# JackFram/llama-68m, the draft of Llama-2-7B in SpecInfer, DySpec and the Delayed paper).
ARCHS: dict[str, ArchSpec] = {
    "qwen2.5-0.5b": ArchSpec("qwen2", 896, 24, 14, 2, 4864, 151936, True, 1e6, 32768, 1e-6),
    "qwen2.5-1.5b": ArchSpec("qwen2", 1536, 28, 12, 2, 8960, 151936, True, 1e6, 32768, 1e-6),
    "qwen2.5-7b": ArchSpec("qwen2", 3584, 28, 28, 4, 18944, 152064, False, 1e6, 32768, 1e-6),
    "llama-2-7b": ArchSpec("llama", 4096, 32, 32, 32, 11008, 32000, False, 1e4, 4096, 1e-5),
    "llama-68m": ArchSpec("llama", 768, 2, 12, 12, 3072, 32000, False, 1e4, 2048, 1e-6),
}
# CPU-sized shapes: a target about 20x its draft's per-token work, a vocabulary large enough
# that a synthetic pair's greedy walk does not cycle within a few dozen tokens
TOY_ARCHS: dict[str, ArchSpec] = {
    "toy-target": ArchSpec("llama", 768, 8, 12, 4, 2048, 16384, False, 1e4, 4096, 1e-6),
    "toy-draft": ArchSpec("llama", 256, 2, 4, 2, 688, 16384, False, 1e4, 4096, 1e-6),
}
SYNTHETIC_ARCHS = {**ARCHS, **TOY_ARCHS}  # the shapes a `synthetic:ARCH` model may have


def build(
    spec: ArchSpec,
    device: Any,
    dtype: Any,
    seed: int,
    vocab: int | None = None,
    tied: bool | None = None,
) -> Any:
    """A causal LM of `spec`'s shapes with seeded random weights (the config's initializer),
    created on `device` in `dtype`, eval mode, no gradients, SDPA attention."""
    import torch  # lazy: torch
    from transformers import AutoModelForCausalLM  # lazy: transformers

    cfg = spec.config(vocab, tied)
    device = torch.device(device)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    model.set_attn_implementation("sdpa")
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    model = model.to(device=device, dtype=dtype).eval()
    model.requires_grad_(False)
    return model
