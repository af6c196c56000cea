"""Tree attention inside a Hugging Face transformers (5.x) model, behind a switch.

``register()`` adds an attention implementation (default name ``"tree_triton"``) to
transformers' ``AttentionInterface`` and gives it sdpa's mask builder. A model switched
to it (``model.set_attn_implementation(name)``) behaves exactly like ``"sdpa"`` except
inside ``with tree_parents(parents):``, where every attention layer runs
``tree_kernels.tree_attention`` over (cached prefix + tree) with the ancestor-only mask of the
given tree (DDTree Sec. 4.4): the Triton kernel on CUDA / under TRITON_INTERPRET=1, else
the torch reference. Works for every model whose attention calls the interface with
query [B, H, N, D] and key/value [B, Hkv, P + N, D] already holding the cache (Llama,
Qwen2, GPT-NeoX, ...).

The engine's tree forward, for a tree with ``parents`` (LongTensor[N], topological order,
-1 under the last committed token) over a cache of P committed positions:

    with tree_parents(parents):
        logits = model(input_ids=tokens[None], position_ids=(P + depth)[None],
                       past_key_values=cache).logits

Inside the context the model's own attention mask is ignored (the tree defines it), so a
batch must share one tree and carry no padding; position ids are the caller's job
(prefix length + depth, DDTree Sec. 4.4).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

import tree_kernels
from tree_kernels.block_mask import TreeMasks, tree_masks
from tree_kernels.reference import check_parents
from tree_kernels.sdpa_gqa import sdpa_gqa_forward

NAME = "tree_triton"


@dataclass
class _ActiveTree:
    parents: torch.Tensor  # [N]
    masks: dict = field(default_factory=dict)  # device -> TreeMasks, built once, shared by layers

    def masks_on(self, device: torch.device) -> TreeMasks:
        if device not in self.masks:
            self.masks[device] = tree_masks(self.parents, device)
        return self.masks[device]


_ACTIVE: contextvars.ContextVar[_ActiveTree | None] = contextvars.ContextVar(
    "tree_parents", default=None
)


@contextlib.contextmanager
def tree_parents(parents: torch.Tensor) -> Iterator[None]:
    """Within this context, attention of a registered model is tree attention for ``parents``."""
    check_parents(parents)
    token = _ACTIVE.set(_ActiveTree(parents.long()))
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def tree_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers attention function: query [B, H, N, D], key/value [B, Hkv, P + N, D]
    -> (attn_output [B, N, H, D], None). Falls back to sdpa (tree_kernels/sdpa_gqa.py, grouped
    heads inside the kernel) outside ``tree_parents``."""
    active = _ACTIVE.get()
    if active is None:
        return sdpa_gqa_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    n = query.shape[2]
    if active.parents.numel() != n:
        raise ValueError(
            f"tree_parents has {active.parents.numel()} nodes but the forward has {n} query tokens"
        )
    if dropout or kwargs.get("softcap") is not None or kwargs.get("sliding_window") is not None:
        raise NotImplementedError(
            "tree attention supports neither dropout, softcap nor sliding windows"
        )
    masks = active.masks_on(query.device) if tree_kernels.uses_triton(query) else None
    out = tree_kernels.tree_attention(
        query, key, value, active.parents, scale=scaling, masks=masks
    )  # [B, H, N, D]
    return out.transpose(1, 2).contiguous(), None


def register(name: str = NAME) -> str:
    """Register the tree attention implementation under ``name`` and return the name.

    Switch a model with ``model.set_attn_implementation(name)``. The mask builder is
    sdpa's, so outside ``tree_parents`` the model gets the same masks and results as sdpa.
    """
    AttentionInterface.register(name, tree_attention_forward)
    AttentionMaskInterface.register(name, sdpa_mask)
    return name
