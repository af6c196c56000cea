"""The fast path's KV cache as the attention layers see it: one preallocated buffer written at
given slots (engine/runtime/static.py allocates and compacts it; engine/runtime/lean.py's
forward writes it too)."""

from __future__ import annotations

import torch


class SlotCache:
    """What the attention layers see as the cache: `update` writes layer i's new keys/values
    at `slots` [n] and returns the layer's keys/values over the first `width` slots."""

    is_compileable = True

    def __init__(self, kv: torch.Tensor) -> None:
        self.kv = kv  # [layers, 2, 1, H_kv, capacity, D]
        self.slots: torch.Tensor | None = None  # [n] where this forward writes
        self.width = 0  # slots the attention reads (length + n, or capacity when compiled)

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        keys, values = self.kv[layer_idx, 0], self.kv[layer_idx, 1]  # [1, H_kv, capacity, D]
        keys.index_copy_(2, self.slots, key_states)
        values.index_copy_(2, self.slots, value_states)
        return keys[:, :, : self.width], values[:, :, : self.width]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        raise NotImplementedError("the fast path always passes position ids")


def kv_shape(config) -> tuple[int, int, int]:
    """(layers, H_kv, head_dim) of a Llama/Qwen2 or GPT-NeoX config."""
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return config.num_hidden_layers, kv_heads, head_dim
