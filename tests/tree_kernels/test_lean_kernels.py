"""The lean forward's Triton kernels (tree_kernels/rms_norm.py, rope_append.py, silu_mul.py) against
their pure-torch references, which compute what transformers' Llama / Qwen2 modules do.

Runs on CUDA when present, else under the Triton CPU interpreter (TRITON_INTERPRET=1 set
before triton is imported, as `make test` does). fp32: the same values up to summation order
(the norm's mean); bf16: within one bf16 rounding (the interpreter truncates fp32 -> bf16
where a GPU rounds to nearest)."""

import pytest
import torch

from tree_kernels.rms_norm import rms_norm, rms_norm_reference
from tree_kernels.rope_append import rope_append, rope_append_reference
from tree_kernels.silu_mul import BLOCK, silu_mul, silu_mul_reference
from tree_kernels.triton_tree_attention import is_interpreted

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
if DEVICE == "cpu" and not is_interpreted():
    pytest.skip("no CUDA and TRITON_INTERPRET=1 not set", allow_module_level=True)

TOL = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.bfloat16: dict(atol=3e-2, rtol=2e-2)}
DTYPES = list(TOL)


def randn(*shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(DEVICE, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d", [64, 96])  # 96: a row shorter than the kernel's block
@pytest.mark.parametrize("residual", [False, True])
def test_rms_norm_matches_the_reference(dtype, d, residual):
    h, w = randn(5, d, dtype=dtype), randn(d, dtype=dtype, seed=1)
    r = randn(5, d, dtype=dtype, seed=2) if residual else None
    out, x = rms_norm(h, r, w, 1e-6)
    want_out, want_x = rms_norm_reference(h, r, w, 1e-6)
    torch.testing.assert_close(out, want_out, **TOL[dtype])
    if dtype == torch.float32 or DEVICE == "cuda":  # the add rounds once, as torch's does
        assert torch.equal(x, want_x)
    torch.testing.assert_close(x, want_x, **TOL[dtype])
    assert (x is h) != residual


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads,kv_heads,d", [(4, 2, 16), (2, 2, 64), (6, 1, 32)])
def test_rope_append_rotates_queries_and_writes_keys_values_at_the_slots(dtype, heads, kv_heads, d):
    n, capacity = 3, 12
    qkv = randn(n, (heads + 2 * kv_heads) * d, dtype=dtype)
    angles = torch.arange(n, dtype=torch.float32)[:, None] * torch.linspace(0.1, 1.0, d // 2)
    angles = torch.cat([angles, angles], -1).to(DEVICE)  # [n, D], the halves' layout
    cos, sin = angles.cos().to(dtype), angles.sin().to(dtype)
    slots = torch.tensor([7, 2, 9], device=DEVICE)  # out of order, with gaps
    kv = randn(2, 1, kv_heads, capacity, d, dtype=dtype, seed=3)
    want_kv = kv.clone()
    q = rope_append(qkv, cos, sin, kv, slots, heads, kv_heads)
    want_q = rope_append_reference(qkv, cos, sin, want_kv, slots, heads, kv_heads)
    assert q.shape == (heads, n, d)
    torch.testing.assert_close(q, want_q, **TOL[dtype])
    torch.testing.assert_close(kv, want_kv, **TOL[dtype])
    untouched = [s for s in range(capacity) if s not in slots.tolist()]
    assert torch.equal(kv[..., untouched, :], want_kv[..., untouched, :])
    v = qkv.view(n, heads + 2 * kv_heads, d)[:, heads + kv_heads :]  # [n, H_kv, D]
    assert torch.equal(kv[1, 0][:, slots], v.transpose(0, 1))  # values copied as they are


def test_rope_append_reference_is_transformers_rotary_embedding():
    """The reference against transformers' own apply_rotary_pos_emb (Llama's)."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    heads, kv_heads, d, n = 4, 2, 16, 3
    qkv = randn(n, (heads + 2 * kv_heads) * d, dtype=torch.float32)
    angles = torch.arange(n, dtype=torch.float32)[:, None] * torch.linspace(0.1, 1.0, d // 2)
    angles = torch.cat([angles, angles], -1).to(DEVICE)
    cos, sin = angles.cos(), angles.sin()
    kv = torch.zeros(2, 1, kv_heads, 8, d, device=DEVICE)
    q = rope_append_reference(qkv, cos, sin, kv, torch.arange(n, device=DEVICE), heads, kv_heads)
    split = qkv.view(1, n, heads + 2 * kv_heads, d).transpose(1, 2)  # [1, heads, n, D]
    want_q, want_k = apply_rotary_pos_emb(
        split[:, :heads], split[:, heads : heads + kv_heads], cos[None], sin[None]
    )
    assert torch.equal(q, want_q[0]) and torch.equal(kv[0, :, :, :n], want_k)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("width", [100, BLOCK + 3])  # one block, and two with a ragged end
def test_silu_mul_matches_the_reference(dtype, width):
    gu = randn(4, 2 * width, dtype=dtype)
    torch.testing.assert_close(silu_mul(gu), silu_mul_reference(gu), **TOL[dtype])
