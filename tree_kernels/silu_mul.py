"""The gated MLP's activation, silu(gate) * up, in one Triton kernel, and its pure-torch reference.

A Llama / Qwen2 MLP computes down(silu(gate(x)) * up(x)) (Shazeer 2020, GLU variants, SwiGLU).
With the gate and up projections fused into one matrix product (engine/runtime/lean.py) their
output is gu [n, 2 I], gate first; Hugging Face's two kernels (silu, product) become one, one
program per (row, block of columns), rounding after the silu and after the product as torch
does.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 1024


def silu_mul_reference(gu: torch.Tensor) -> torch.Tensor:
    """[n, I]: silu(gu[:, :I]) * gu[:, I:] for gu [n, 2 I]."""
    gate, up = gu.chunk(2, -1)
    return torch.nn.functional.silu(gate) * up


@triton.jit
def _silu_mul_kernel(gu_ptr, out_ptr, width, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    inside = cols < width
    dtype = out_ptr.dtype.element_ty
    g = tl.load(gu_ptr + row * 2 * width + cols, mask=inside, other=0.0).to(tl.float32)
    u = tl.load(gu_ptr + row * 2 * width + width + cols, mask=inside, other=0.0).to(tl.float32)
    act = (g / (1.0 + tl.exp(-g))).to(dtype).to(tl.float32)
    tl.store(out_ptr + row * width + cols, (act * u).to(dtype), mask=inside)


def silu_mul(gu: torch.Tensor) -> torch.Tensor:
    """silu_mul_reference in one kernel launch; gu [n, 2 I] contiguous."""
    n, width = gu.shape[0], gu.shape[1] // 2
    out = torch.empty(n, width, dtype=gu.dtype, device=gu.device)
    _silu_mul_kernel[(n, triton.cdiv(width, BLOCK))](gu, out, width, BLOCK=BLOCK)
    return out
