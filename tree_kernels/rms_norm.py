"""RMSNorm with the residual add before it, in one Triton kernel, and its pure-torch reference.

A Llama / Qwen2 decoder layer adds each block's output to the residual stream and normalises
the sum for the next block (Zhang & Sennrich 2019, RMSNorm; transformers' LlamaRMSNorm):

    x = residual + h                     (in the model's dtype)
    y = weight * (x / sqrt(mean(x^2) + eps))   (the norm in fp32, cast back before the weight)

Hugging Face runs this as about eight elementwise kernels per norm (add, cast, square, mean,
add, rsqrt, multiply, cast, multiply); on a GPU at batch one each is a few microseconds of a
decoding step that moves no weights (docs/gpu.md: 2.7 ms of a 7B model's 8.7 ms per token on
`graphs` outside matrix products). The kernel does the add and the norm in one pass, one
program per row, rounding where the reference rounds, so in fp32 it returns the reference's
values up to the order of the mean's summation.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


def rms_norm_reference(
    h: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(normed [n, d], x [n, d]): x = residual + h (h alone without a residual), normed =
    weight * rmsnorm(x), as transformers' LlamaRMSNorm computes it."""
    x = h if residual is None else residual + h
    xf = x.to(torch.float32)
    normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * normed.to(x.dtype), x


@triton.jit
def _rms_norm_kernel(
    h_ptr, res_ptr, w_ptr, out_ptr, x_ptr, d, eps, HAS_RES: tl.constexpr, BLOCK: tl.constexpr
):
    # one program per row; rows are contiguous (stride d)
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    inside = cols < d
    x = tl.load(h_ptr + row * d + cols, mask=inside, other=0.0)
    if HAS_RES:  # the add rounds to the model's dtype, as torch's does
        r = tl.load(res_ptr + row * d + cols, mask=inside, other=0.0)
        x = (r.to(tl.float32) + x.to(tl.float32)).to(x_ptr.dtype.element_ty)
        tl.store(x_ptr + row * d + cols, x, mask=inside)
    xf = x.to(tl.float32)
    mean = tl.sum(xf * xf, axis=0) / d
    normed = (xf * tl.math.rsqrt(mean + eps)).to(out_ptr.dtype.element_ty).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=inside, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * d + cols, (w * normed).to(out_ptr.dtype.element_ty), mask=inside)


def rms_norm(
    h: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """rms_norm_reference in one kernel launch. h, residual: [n, d] contiguous, one dtype;
    weight [d] of that dtype."""
    n, d = h.shape
    out = torch.empty_like(h)
    x = h if residual is None else torch.empty_like(h)
    _rms_norm_kernel[(n,)](
        h,
        h if residual is None else residual,
        weight,
        out,
        x,
        d,
        eps,
        HAS_RES=residual is not None,
        BLOCK=triton.next_power_of_2(d),
    )
    return out, x
