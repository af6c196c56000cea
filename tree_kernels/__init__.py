"""Tree attention for verification: a Triton kernel and a plain-torch reference.

``tree_attention`` runs the Triton kernel when Triton is importable and the tensors are
on CUDA (or the kernel was built for the interpreter, TRITON_INTERPRET=1) with a supported
head dim (64, 128) and dtype (fp32, fp16, bf16), else the reference. Importing this
package never requires Triton; the kernel itself is ``tree_kernels.triton_tree_attention``, the
Hugging Face switch is ``tree_kernels.hf_attention``.
"""

from __future__ import annotations

import torch

from tree_kernels.block_mask import block_visibility, visible_block_count
from tree_kernels.reference import ancestor_matrix, tree_attention_reference
from tree_kernels.reorder import dfs_order, inverse_permutation, permute_tree

try:
    from tree_kernels import triton_tree_attention as _triton_impl
except ImportError:  # no triton on this machine
    _triton_impl = None

HAS_TRITON = _triton_impl is not None


def uses_triton(q: torch.Tensor) -> bool:
    """Whether ``tree_attention`` would run the Triton kernel for these tensors: Triton is
    importable, q is on CUDA (or the kernel runs interpreted), and its head dim and dtype
    are ones the kernel supports (other shapes take the reference)."""
    return (
        _triton_impl is not None
        and (q.is_cuda or _triton_impl.is_interpreted())
        and q.shape[-1] in _triton_impl.HEAD_DIMS
        and q.dtype in _triton_impl.DTYPES
    )


def tree_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    parents: torch.Tensor,
    scale: float | None = None,
    masks=None,
) -> torch.Tensor:
    """q: [B, H, N, D]; k, v: [B, Hkv, P + N, D]; parents: LongTensor[N] -> [B, H, N, D].

    ``masks`` (optional, Triton path only) is ``tree_kernels.block_mask.tree_masks(parents,
    device)``, precomputed once per tree and shared by all layers.
    """
    if uses_triton(q):
        return _triton_impl.tree_attention(q, k, v, parents, scale, masks=masks)
    return tree_attention_reference(q, k, v, parents, scale)


__all__ = [
    "HAS_TRITON",
    "ancestor_matrix",
    "block_visibility",
    "dfs_order",
    "inverse_permutation",
    "permute_tree",
    "tree_attention",
    "tree_attention_reference",
    "uses_triton",
    "visible_block_count",
]
