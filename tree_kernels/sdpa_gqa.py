"""The engine's default attention: transformers' "sdpa", with grouped-query attention kept inside
the kernel when a mask is given (attn="sdpa_gqa"; engine/models.py loads models with it).

A tree-verification forward (N > 1 new tokens under an ancestor-only mask) and every forward of
the fast path carry an explicit mask. With a mask and more than one query, transformers' sdpa
(integrations/sdpa_attention.py, `use_gqa_in_sdpa`) does not pass `enable_gqa` to
`torch.nn.functional.scaled_dot_product_attention`: it copies the cached keys and values to
every query head first (`repeat_kv`), a [H, P + N, D] copy per layer and forward. For
Qwen2.5-1.5B (12 query heads, 2 key/value heads) at 560 cached tokens that copy made one
layer's attention ~1.1 ms instead of ~0.15 ms on this project's CPU (one thread, 4 queries);
whole forwards of 2-4 new tokens ran 1.05-1.11x faster without it (bench/sdpa_gqa.py,
bench/records/sdpa_gqa_real_pair.json). torch's SDPA takes the mask and the grouped heads
together (`enable_gqa=True`, torch >= 2.5), so this function does exactly that and otherwise
defers to transformers' sdpa: same inputs, same outputs up to floating-point summation order.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

NAME = "sdpa_gqa"


def sdpa_gqa_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers attention function: query [B, H, N, D], key/value [B, Hkv, P + N, D],
    attention_mask [B, 1, N, P + N] additive or bool, or None -> ([B, N, H, D], None)."""
    groups = getattr(module, "num_key_value_groups", 1)
    if (
        attention_mask is None
        or groups == 1
        or query.shape[2] == 1  # transformers packs a single query into the key/value heads
        or dropout
        or kwargs.get("softcap") is not None
        or kwargs.get("position_bias") is not None
    ):
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    mask = attention_mask[:, :, :, : key.shape[2]]  # [B, 1, N, P + N]
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, scale=scaling, enable_gqa=True
    )  # [B, H, N, D]
    return out.transpose(1, 2).contiguous(), None


def register() -> str:
    """Register "sdpa_gqa" (sdpa's mask builder) with transformers and return its name."""
    AttentionInterface.register(NAME, sdpa_gqa_forward)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    return NAME
