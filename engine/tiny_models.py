"""The built-in tiny random models (DESIGN.md, "Built-in model names"; engine/model_names.py
TINY_MODELS): small fp32 Llama and GPT-NeoX models built from configs with fixed seeds and the
byte-level tokenizer's vocabulary. Each draft is derived from its target (the target's
weights plus small relative noise), so its greedy tokens agree with the target's often but
not always: long accepted paths and rejections both get exercised."""

from __future__ import annotations

from typing import Any

import torch

from engine.model_names import TINY_MODELS
from engine.tokenizers import BOS_ID, EOS_ID, TINY_VOCAB

TINY_POSITIONS = 4096

# Larger than the usual 0.02 so attention and MLPs shape the output (with 0.02 a random
# model repeats a few tokens). Drafts are noisy full-depth copies: a truncated copy of a
# random model agrees with it on under 5% of greedy tokens, too rare to exercise long paths.
TINY_INIT_STD = 0.1


def tiny_config(family: str, layers: int) -> Any:
    from transformers import GPTNeoXConfig, LlamaConfig  # lazy: transformers

    common = dict(
        vocab_size=TINY_VOCAB,
        hidden_size=64,
        intermediate_size=192,
        num_hidden_layers=layers,
        num_attention_heads=4,
        max_position_embeddings=TINY_POSITIONS,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        initializer_range=TINY_INIT_STD,
    )
    if family == "llama":
        return LlamaConfig(num_key_value_heads=2, tie_word_embeddings=False, **common)
    return GPTNeoXConfig(rotary_pct=0.5, use_parallel_residual=True, **common)


def build_tiny(name: str) -> Any:
    from transformers import GPTNeoXForCausalLM, LlamaForCausalLM  # lazy: transformers

    spec = TINY_MODELS[name]
    cls = LlamaForCausalLM if spec.family == "llama" else GPTNeoXForCausalLM
    if spec.draft_of is None:  # seeded init on a forked RNG: the caller's RNG is left as it was
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(spec.seed)
            return cls(tiny_config(spec.family, spec.layers))
    target = build_tiny(spec.draft_of)
    draft = cls(tiny_config(spec.family, spec.layers))
    state = dict(target.state_dict())
    gen = torch.Generator().manual_seed(spec.seed)
    for k, v in state.items():
        if v.is_floating_point() and v.dim() >= 2:
            state[k] = v + spec.noise * v.std() * torch.randn(v.shape, generator=gen)
    draft.load_state_dict(state)
    return draft
