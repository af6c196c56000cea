"""Block-sparse FlashAttention for tree verification, in Triton.

The forward pass of speculative verification attends N draft-tree nodes (queries) to P
committed prefix positions, all visible, and to the tree itself under the ancestor-only
mask (DDTree Sec. 4.4). Like DySpec's custom-mask FlashAttention (App. C.1) the kernel
runs an online softmax (FlashAttention) over key blocks of 32 and skips every
(query block, key block) tile of the tree part that holds no visible pair; the DFS
reorder (``tree_kernels/reorder.py``, App. C Def. 1) makes such tiles common.

Host side (vectorised torch, once per tree, reusable across layers):
  * ``tree_masks(parents)`` packs the ancestor matrix into one 32-bit word per
    (query, key block) and lists, per query block, the key blocks with any visible pair.
Device side, one program per (query block, batch * head):
  * prefix keys in blocks of ``PREFIX_BLOCK``, no mask beyond the tail;
  * the listed tree key blocks only, each masked by its ancestor bits.
On a GPU ``triton.autotune`` picks the prefix block, warps and stages per head dim, dtype
and power-of-two class of N and P (``GPU_CONFIGS``); the interpreter runs one fixed config.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from tree_kernels.block_mask import BLOCK_M, BLOCK_N, TreeMasks, tree_masks

HEAD_DIMS = (64, 128)
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit
def _dot(a, b, PRECISION: tl.constexpr, UPCAST: tl.constexpr):
    # UPCAST works around the Triton CPU interpreter, whose dot multiplies the raw
    # uint16 storage of bf16 operands; values are already bf16, so the result is exact.
    if UPCAST:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    else:
        return tl.dot(a, b, input_precision=PRECISION)


@triton.jit
def _attend_block(
    q, k, v, visible, m_i, l_i, acc, qk_scale, PRECISION: tl.constexpr, UPCAST: tl.constexpr
):
    # One online-softmax (FlashAttention) step over a block of BK keys, in base 2.
    # q: [BM, D]; k: [D, BK]; v: [BK, D]; visible: [BM, BK] or [1, BK];
    # m_i, l_i: [BM] running max and sum; acc: [BM, D] unnormalised output.
    s = _dot(q, k, PRECISION, UPCAST) * qk_scale  # [BM, BK]
    s = tl.where(visible, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.math.exp2(m_i - m_new)  # rescales what was summed under the old max
    p = tl.math.exp2(s - m_new[:, None])  # [BM, BK]
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + _dot(p.to(v.dtype), v, PRECISION, UPCAST)
    return m_new, l_i, acc


@triton.jit
def _tree_attention_fwd(
    Q,
    K,
    V,
    O,
    BITS,
    COUNTS,
    BLOCKS,
    qk_scale,  # softmax scale * log2(e): the kernel works in base 2
    s_qb,
    s_qh,
    s_qn,
    s_qd,
    s_kb,
    s_kh,
    s_kn,
    s_kd,
    s_vb,
    s_vh,
    s_vn,
    s_vd,
    s_ob,
    s_oh,
    s_on,
    s_od,
    H,
    N,
    P,
    GROUP,
    WORDS,
    N_POW2,
    P_POW2,  # next powers of two of N and P: the autotuning key, unused in the body
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    PREFIX_BLOCK: tl.constexpr,
    PRECISION: tl.constexpr,
    UPCAST: tl.constexpr,
):
    qblock = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    hk = h // GROUP  # GQA: query head h reads key/value head h // (H // Hkv)

    offs_m = qblock * BLOCK_M + tl.arange(0, BLOCK_M)  # [BM] query (tree node) indices
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < N
    q_ptr = Q + b * s_qb + h * s_qh + offs_m[:, None] * s_qn + offs_d[None, :] * s_qd
    q = tl.load(q_ptr, mask=row_ok[:, None], other=0.0)  # [BM, D]
    k_base = K + b * s_kb + hk * s_kh
    v_base = V + b * s_vb + hk * s_vh

    # Finite start so a row whose tile is fully masked keeps alpha = exp2(0), not NaN.
    m_i = tl.full([BLOCK_M], -1.0e30, tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)

    # Prefix: every query sees every committed position.
    for start in range(0, P, PREFIX_BLOCK):
        offs_n = start + tl.arange(0, PREFIX_BLOCK)  # [BP]
        col_ok = offs_n < P
        k = tl.load(
            k_base + offs_n[None, :] * s_kn + offs_d[:, None] * s_kd,
            mask=col_ok[None, :],
            other=0.0,
        )
        v = tl.load(
            v_base + offs_n[:, None] * s_vn + offs_d[None, :] * s_vd,
            mask=col_ok[:, None],
            other=0.0,
        )
        m_i, l_i, acc = _attend_block(
            q, k, v, col_ok[None, :], m_i, l_i, acc, qk_scale, PRECISION, UPCAST
        )

    # Tree: only the key blocks listed for this query block; masked by ancestor bits.
    count = tl.load(COUNTS + qblock)
    bit = tl.arange(0, BLOCK_N)
    for i in range(0, count):
        kblock = tl.load(BLOCKS + qblock * WORDS + i)
        offs_n = kblock * BLOCK_N + bit  # [BN] tree node indices
        col_ok = offs_n < N
        k = tl.load(
            k_base + (P + offs_n)[None, :] * s_kn + offs_d[:, None] * s_kd,
            mask=col_ok[None, :],
            other=0.0,
        )
        v = tl.load(
            v_base + (P + offs_n)[:, None] * s_vn + offs_d[None, :] * s_vd,
            mask=col_ok[:, None],
            other=0.0,
        )
        word = tl.load(BITS + offs_m * WORDS + kblock, mask=row_ok, other=0)  # [BM] int32
        visible = ((word[:, None] >> bit[None, :]) & 1) != 0  # [BM, BN]
        m_i, l_i, acc = _attend_block(q, k, v, visible, m_i, l_i, acc, qk_scale, PRECISION, UPCAST)

    l_i = tl.where(l_i > 0.0, l_i, 1.0)  # padding rows past N see nothing
    out = acc / l_i[:, None]
    o_ptr = O + b * s_ob + h * s_oh + offs_m[:, None] * s_on + offs_d[None, :] * s_od
    tl.store(o_ptr, out.to(O.dtype.element_ty), mask=row_ok[:, None])


def is_interpreted() -> bool:
    """True when the kernel was built for the Triton CPU interpreter (TRITON_INTERPRET=1 at
    import)."""
    return type(_tree_attention_fwd).__name__ == "InterpretedFunction"


# BLOCK_M and BLOCK_N are baked into the masks of tree_kernels/block_mask.py (one int32 word of
# ancestor bits per 32 tree keys, one key-block list per 32 queries), so no config changes
# them: only the prefix step, warps and stages are tuned. (PREFIX_BLOCK, num_stages) pairs
# are those whose pipelined K/V tiles fit the 227 KB of shared memory of an H100 in the
# worst case, fp32 at D = 128 (160 KB at (128, 2); (128, 3) would need 288 KB).
GPU_CONFIGS = [
    triton.Config({"PREFIX_BLOCK": block}, num_warps=warps, num_stages=stages)
    for block, stages in ((32, 2), (32, 3), (64, 2), (64, 3), (128, 2))
    for warps in (2, 4, 8)
]
# The interpreter times nothing worth tuning: one config, the prefix in steps of 64 keys
# (the prefix is dense, so a step wider than the 32-key tree tiles is cheaper).
INTERPRETER_CONFIG = triton.Config({"PREFIX_BLOCK": 64}, num_warps=4, num_stages=2)

_tuned_fwd = triton.autotune(
    [INTERPRETER_CONFIG] if is_interpreted() else GPU_CONFIGS,
    key=["HEAD_DIM", "N_POW2", "P_POW2"],  # and the dtypes of the tensor arguments
    cache_results=True,  # timings persist in Triton's cache dir, reused by later processes
)(_tree_attention_fwd)


def tree_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    parents: torch.Tensor,
    scale: float | None = None,
    *,
    masks: TreeMasks | None = None,
) -> torch.Tensor:
    """Tree attention with the Triton kernel.

    q: [B, H, N, D]; k, v: [B, Hkv, P + N, D], H a multiple of Hkv, D in (64, 128);
    parents: LongTensor[N] in topological order, -1 under the last prefix position.
    fp32, fp16 or bf16 (all three the same); fp32 dots run in IEEE fp32, not TF32.
    ``masks``: ``tree_masks(parents, q.device)`` computed once and reused across layers.
    Returns [B, H, N, D] in q's dtype. On a GPU the first call for a new head dim, dtype or
    power-of-two class of N and P times ``GPU_CONFIGS`` before it returns.
    """
    b, h, n, d = q.shape
    hkv, total = k.shape[1], k.shape[2]
    if d not in HEAD_DIMS or k.shape[-1] != d or v.shape != k.shape:
        raise ValueError(
            f"head dim must be one of {HEAD_DIMS} and k, v alike; got q {q.shape}, "
            f"k {k.shape}, v {v.shape}"
        )
    if q.dtype not in DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(
            f"dtypes must match and be one of {DTYPES}; got {q.dtype}, {k.dtype}, {v.dtype}"
        )
    if h % hkv or k.shape[0] != b:
        raise ValueError(
            f"query heads {h} must be a multiple of key/value heads {hkv}, batches equal"
        )
    if parents.numel() != n or total < n:
        raise ValueError(f"parents has {parents.numel()} nodes, q has {n}, keys {total}")
    out = torch.empty_like(q)  # [B, H, N, D]
    if n == 0 or b == 0:
        return out
    if masks is None:
        masks = tree_masks(parents, q.device)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    grid = (triton.cdiv(n, BLOCK_M), b * h)
    _tuned_fwd[grid](
        q,
        k,
        v,
        out,
        masks.bits,
        masks.counts,
        masks.blocks,
        scale * math.log2(math.e),
        *q.stride(),
        *k.stride(),
        *v.stride(),
        *out.stride(),
        h,
        n,
        total - n,
        h // hkv,
        masks.bits.shape[1],
        triton.next_power_of_2(n),
        triton.next_power_of_2(total - n),
        HEAD_DIM=d,
        BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N,
        PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        UPCAST=q.dtype == torch.bfloat16 and is_interpreted(),
    )
    return out
