"""Rotary embedding of a forward's queries and keys, with the keys and values written into a
preallocated KV cache, in one Triton kernel; and its pure-torch reference.

After a Llama / Qwen2 layer's fused query-key-value projection qkv [n, (H + 2 H_kv) D] (per
row: H query heads, H_kv key heads, H_kv value heads, D each), the attention needs the
queries and keys rotated by their positions (Su et al. 2021, RoFormer, Eq. 34, in the
half-split layout of transformers' `rotate_half`):

    rot(x) = x * cos + [-x2, x1] * sin      (x = [x1, x2], halves of one head)

and the new keys and values stored at this forward's cache slots (engine/runtime/static.py).
Hugging Face does this with about a dozen kernels per layer (slices, negation, concatenation,
four products, two sums, two `index_copy_`); the kernel does it in one, one program per (row,
head), and rounds after each product and the sum as torch's elementwise ops do, so it returns
the reference's values up to the last bit (a GPU may fuse a product and a sum; the CPU
interpreter truncates to bf16 where torch rounds). cos and sin come in already computed by the
model's own rotary module, once per forward.

The queries come out as [H, n, D]: grouped by key/value head (query head h reads key/value head
h // (H / H_kv)), which the attention reads as [H_kv, (H / H_kv) n, D] without a copy
(engine/runtime/lean.py).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


def rope_append_reference(
    qkv: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    kv: torch.Tensor,
    slots: torch.Tensor,
    heads: int,
    kv_heads: int,
) -> torch.Tensor:
    """The rotated queries [H, n, D]; writes the rotated keys and the values of the n rows at
    `slots` [n] of kv [2, 1, H_kv, capacity, D]. qkv [n, (H + 2 H_kv) D]; cos, sin [n, D]."""
    n, d = qkv.shape[0], kv.shape[-1]
    q, k, v = qkv.view(n, heads + 2 * kv_heads, d).split([heads, kv_heads, kv_heads], 1)

    def rotate(x):  # [n, heads, D] -> [heads, n, D]
        x1, x2 = x[..., : d // 2], x[..., d // 2 :]
        return (x * cos[:, None] + torch.cat((-x2, x1), -1) * sin[:, None]).transpose(0, 1)

    kv[0, 0].index_copy_(1, slots, rotate(k))
    kv[1, 0].index_copy_(1, slots, v.transpose(0, 1))
    return rotate(q).contiguous()


@triton.jit
def _rope_append_kernel(
    qkv_ptr,
    cos_ptr,
    sin_ptr,
    q_ptr,
    kv_ptr,
    slots_ptr,
    n,
    HEADS: tl.constexpr,
    KV_HEADS: tl.constexpr,
    D: tl.constexpr,
    stride_kind,
    stride_head,
    stride_slot,
):
    # program (t, h): row t, head h of [queries | keys]; the keys' programs copy the values too
    t = tl.program_id(0)
    h = tl.program_id(1)
    half = tl.arange(0, D // 2)
    dtype = q_ptr.dtype.element_ty
    row = qkv_ptr + t * (HEADS + 2 * KV_HEADS) * D
    x1 = tl.load(row + h * D + half).to(tl.float32)
    x2 = tl.load(row + h * D + D // 2 + half).to(tl.float32)
    c1 = tl.load(cos_ptr + t * D + half).to(tl.float32)
    c2 = tl.load(cos_ptr + t * D + D // 2 + half).to(tl.float32)
    s1 = tl.load(sin_ptr + t * D + half).to(tl.float32)
    s2 = tl.load(sin_ptr + t * D + D // 2 + half).to(tl.float32)
    # x * cos and rotate_half(x) * sin each round to the dtype, then their sum does
    a1 = (x1 * c1).to(dtype).to(tl.float32)
    b1 = (-x2 * s1).to(dtype).to(tl.float32)
    a2 = (x2 * c2).to(dtype).to(tl.float32)
    b2 = (x1 * s2).to(dtype).to(tl.float32)
    y1, y2 = (a1 + b1).to(dtype), (a2 + b2).to(dtype)
    if h < HEADS:
        out = q_ptr + (h * n + t) * D
        tl.store(out + half, y1)
        tl.store(out + D // 2 + half, y2)
    else:
        j = h - HEADS
        slot = tl.load(slots_ptr + t)
        key = kv_ptr + j * stride_head + slot * stride_slot
        tl.store(key + half, y1)
        tl.store(key + D // 2 + half, y2)
        full = tl.arange(0, D)
        value = tl.load(row + (HEADS + KV_HEADS + j) * D + full)
        tl.store(key + stride_kind + full, value)


def rope_append(
    qkv: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    kv: torch.Tensor,
    slots: torch.Tensor,
    heads: int,
    kv_heads: int,
) -> torch.Tensor:
    """rope_append_reference in one kernel launch. qkv, cos, sin contiguous; D a power of two;
    kv [2, 1, H_kv, capacity, D] with unit stride in D."""
    n, d = qkv.shape[0], kv.shape[-1]
    q = torch.empty(heads, n, d, dtype=qkv.dtype, device=qkv.device)
    _rope_append_kernel[(n, heads + kv_heads)](
        qkv,
        cos,
        sin,
        q,
        kv,
        slots,
        n,
        HEADS=heads,
        KV_HEADS=kv_heads,
        D=d,
        stride_kind=kv.stride(0),
        stride_head=kv.stride(2),
        stride_slot=kv.stride(3),
    )
    return q
