"""The Triton tree attention kernel against the plain-torch reference.

Runs on CUDA when present, else under the Triton CPU interpreter (TRITON_INTERPRET=1 must
be set before the test process imports triton); skips where triton is not installed.

Which combinations run (the interpreter costs ~1 s per N=300 case, ~0.05 s per small one):
  * N in {1, 7, 64}: the full product with P in {0, 17, 256}, dtype in {fp32, fp16, bf16},
    head dim in {64, 128}, heads (H, Hkv) in {(2, 2) plain, (4, 1) GQA}: 108 cases, ~9 s.
  * N = 300 (10 query blocks, N and P + N not multiples of 32): every (P, dtype) pair, with
    head dim and GQA assigned by an L9 orthogonal array so that every pair of levels of
    any two factors occurs at least once: 9 cases.
  * targeted tests: block skipping (NaN-poisoned invisible blocks), DFS reorder round
    trip, strided inputs with B=2 and a custom scale, the package dispatch, bad input.
B=1 (B=2 in the strided test) and few heads keep the interpreter affordable.

Tolerances, kernel output vs the fp32 reference on the same (rounded) inputs:
  fp32: 2e-5 (IEEE fp32 dots; only the summation order differs);
  fp16: 2e-3 (probabilities rounded to fp16 before the PV product, output rounding);
  bf16: 2e-2 (same with 8 mantissa bits; the interpreter also truncates fp32 -> bf16
        instead of rounding to nearest, so up to 2 bf16 ulps at |out| < 2).
"""

import itertools
import math

import pytest
import torch

pytest.importorskip("triton")

import tree_kernels  # noqa: E402
from tests.trees import random_bushy_tree  # noqa: E402
from tree_kernels.block_mask import block_visibility, tree_masks, visible_block_count  # noqa: E402
from tree_kernels.reference import tree_attention_reference  # noqa: E402
from tree_kernels.reorder import dfs_order, inverse_permutation, permute_tree  # noqa: E402
from tree_kernels.triton_tree_attention import GPU_CONFIGS, INTERPRETER_CONFIG, is_interpreted  # noqa: E402
from tree_kernels.triton_tree_attention import tree_attention as triton_tree_attention  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
if DEVICE == "cpu" and not is_interpreted():
    pytest.skip("no CUDA and TRITON_INTERPRET=1 not set", allow_module_level=True)

TOL = {torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}
DTYPES = list(TOL)
HEADS = [(2, 2), (4, 1)]  # (H, Hkv): plain multi-head and grouped-query


def make_inputs(n, prefix, d, h, hkv, dtype, seed, b=1):
    gen = torch.Generator().manual_seed(seed)
    parents = random_bushy_tree(n, 10, gen)
    q = torch.randn(b, h, n, d, generator=gen)  # [B, H, N, D]
    k = torch.randn(b, hkv, prefix + n, d, generator=gen)  # [B, Hkv, P + N, D]
    v = torch.randn(b, hkv, prefix + n, d, generator=gen)
    return parents, *(x.to(DEVICE, dtype) for x in (q, k, v))


def check_against_reference(n, prefix, d, heads, dtype, seed=0):
    parents, q, k, v = make_inputs(n, prefix, d, *heads, dtype, seed)
    out = triton_tree_attention(q, k, v, parents)
    assert out.shape == q.shape and out.dtype == dtype
    expected = tree_attention_reference(q.float(), k.float(), v.float(), parents)
    torch.testing.assert_close(out.float(), expected, rtol=TOL[dtype], atol=TOL[dtype])


SMALL = list(itertools.product([1, 7, 64], [0, 17, 256], DTYPES, [64, 128], HEADS))


@pytest.mark.parametrize("n,prefix,dtype,d,heads", SMALL)
def test_small_trees_full_product(n, prefix, dtype, d, heads):
    check_against_reference(n, prefix, d, heads, dtype, seed=n * 1000 + prefix)


# L9 orthogonal array rows (i, j, (i + j) % 3, (i + 2j) % 3); the last two columns fold
# 3 levels onto 2 (0, 1, 0), which keeps every pair of levels of two factors covered.
L9 = [(i, j, (i + j) % 3 % 2, (i + 2 * j) % 3 % 2) for i in range(3) for j in range(3)]
LARGE = [([0, 17, 256][i], DTYPES[j], [64, 128][a], HEADS[c]) for i, j, a, c in L9]


@pytest.mark.parametrize("prefix,dtype,d,heads", LARGE)
def test_300_nodes_covering_set(prefix, dtype, d, heads):
    check_against_reference(300, prefix, d, heads, dtype, seed=prefix + 7)


def test_covering_set_covers_all_pairs():
    factors = list(zip(*LARGE))
    for a, b in itertools.combinations(range(4), 2):
        levels_a, levels_b = set(factors[a]), set(factors[b])
        assert set(zip(factors[a], factors[b])) == set(itertools.product(levels_a, levels_b))


def test_invisible_blocks_are_never_read():
    """Poison the values of one tree key block with NaN. A tile the kernel computes mixes
    those NaNs into its output even where the mask zeroes them (0 * NaN), so query blocks
    that must not read the block stay finite only if the kernel skips the tile."""
    n, prefix, d = 160, 17, 64
    parents, q, k, v = make_inputs(n, prefix, d, 2, 2, torch.float32, seed=3)
    table = block_visibility(parents)  # [5, 5]
    kb = 1
    hidden = (~table[:, kb]).nonzero().flatten().tolist()
    seen = table[:, kb].nonzero().flatten().tolist()
    assert hidden and seen, table
    poisoned = v.clone()
    poisoned[:, :, prefix + 32 * kb : prefix + 32 * (kb + 1)] = float("nan")
    out = triton_tree_attention(q, k, poisoned, parents)
    expected = tree_attention_reference(q, k, v, parents)
    for qb in hidden:
        rows = slice(32 * qb, 32 * (qb + 1))
        torch.testing.assert_close(out[:, :, rows], expected[:, :, rows], rtol=2e-5, atol=2e-5)
    for qb in seen:  # the poison is live: a computed tile does propagate it
        assert torch.isnan(out[:, :, 32 * qb : 32 * (qb + 1)]).any()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_dfs_reorder_round_trip(dtype):
    """Outputs of the reordered tree, mapped back with the inverse permutation, equal the
    outputs of the tree as given; the reordered tree has fewer visible tiles."""
    n, prefix, d = 300, 17, 64
    parents, q, k, v = make_inputs(n, prefix, d, 4, 2, dtype, seed=11)
    perm = dfs_order(parents)
    inv = inverse_permutation(perm)
    new_parents = permute_tree(parents, perm)
    assert visible_block_count(new_parents) < visible_block_count(parents)
    tree_perm = torch.cat([torch.arange(prefix), prefix + perm]).to(DEVICE)  # keys: prefix fixed
    out_new = triton_tree_attention(
        q[:, :, perm.to(DEVICE)], k[:, :, tree_perm], v[:, :, tree_perm], new_parents
    )
    out_back = out_new[:, :, inv.to(DEVICE)]
    out = triton_tree_attention(q, k, v, parents)
    torch.testing.assert_close(out_back.float(), out.float(), rtol=TOL[dtype], atol=TOL[dtype])


def test_strided_batched_inputs_and_custom_scale():
    """Hugging Face hands over q as a transposed view of [B, N, H, D]; B=2, scale given."""
    gen = torch.Generator().manual_seed(5)
    n, prefix, d, h, hkv = 40, 33, 64, 4, 2
    parents = random_bushy_tree(n, 6, gen)
    q = torch.randn(2, n, h, d, generator=gen).to(DEVICE).transpose(1, 2)  # [B, H, N, D] view
    k = torch.randn(2, prefix + n, hkv, d, generator=gen).to(DEVICE).transpose(1, 2)
    v = torch.randn(2, prefix + n, hkv, d, generator=gen).to(DEVICE).transpose(1, 2)
    assert not q.is_contiguous()
    out = triton_tree_attention(q, k, v, parents, scale=0.05, masks=tree_masks(parents, DEVICE))
    expected = tree_attention_reference(q, k, v, parents, scale=0.05)
    torch.testing.assert_close(out, expected, rtol=2e-5, atol=2e-5)
    default = triton_tree_attention(q, k, v, parents)
    explicit = triton_tree_attention(q, k, v, parents, scale=1 / math.sqrt(d))
    assert torch.equal(default, explicit)


def test_package_dispatches_to_triton():
    parents, q, k, v = make_inputs(7, 17, 64, 2, 1, torch.float16, seed=2)
    assert tree_kernels.uses_triton(q)
    assert torch.equal(
        tree_kernels.tree_attention(q, k, v, parents), triton_tree_attention(q, k, v, parents)
    )


def test_autotuning_configs_leave_the_mask_blocks_alone():
    """BLOCK_M and BLOCK_N are fixed by the packed masks; configs only pick the prefix step
    (a power of two of at least 16, the smallest tl.dot dimension), warps and stages."""
    for config in [*GPU_CONFIGS, INTERPRETER_CONFIG]:
        assert set(config.kwargs) == {"PREFIX_BLOCK"}, config
        block = config.kwargs["PREFIX_BLOCK"]
        assert block >= 16 and block & (block - 1) == 0, config


@pytest.mark.parametrize(
    "d,dtypes,heads",
    [
        (32, (torch.float32,) * 3, (2, 2)),
        (64, (torch.float16, torch.float32, torch.float16), (2, 2)),
        (64, (torch.float32,) * 3, (3, 2)),
    ],
)
def test_rejects_unsupported_inputs(d, dtypes, heads):
    parents = torch.tensor([-1, 0])
    q = torch.zeros(1, heads[0], 2, d, dtype=dtypes[0], device=DEVICE)
    k = torch.zeros(1, heads[1], 2, d, dtype=dtypes[1], device=DEVICE)
    v = torch.zeros(1, heads[1], 2, d, dtype=dtypes[2], device=DEVICE)
    with pytest.raises(ValueError):
        triton_tree_attention(q, k, v, parents)
