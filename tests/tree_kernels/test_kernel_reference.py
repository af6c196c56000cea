"""The plain-torch tree attention oracle against per-query loops written from the definition."""

import math

import pytest
import torch
from hypothesis import given, settings

from tests.trees import parent_arrays
from tree_kernels.reference import (
    ancestor_matrix,
    check_parents,
    node_depths,
    tree_attention_mask,
    tree_attention_reference,
)

# parents[j] in [-1, j - 1]: every topologically ordered forest under the prefix.
trees = parent_arrays(40, forest=True)


def ancestors_by_walk(parents: list[int], j: int) -> set[int]:
    seen = {j}
    while parents[j] >= 0:
        j = parents[j]
        seen.add(j)
    return seen


@settings(max_examples=60, deadline=None)
@given(trees)
def test_ancestor_matrix_matches_parent_walk(parents):
    anc = ancestor_matrix(torch.tensor(parents))
    for j in range(len(parents)):
        assert set(anc[j].nonzero().flatten().tolist()) == ancestors_by_walk(list(parents), j)
    assert not torch.triu(anc, diagonal=1).any()  # topological order: lower triangular


@pytest.mark.parametrize("n", [1, 2, 3, 64, 65, 300])
def test_ancestor_matrix_of_a_chain_covers_every_depth(n):
    """Pointer doubling takes ceil(log2 n) steps: a chain is the deepest tree of n nodes."""
    anc = ancestor_matrix(torch.arange(-1, n - 1), check=False)
    assert torch.equal(anc, torch.ones(n, n, dtype=torch.bool).tril())


@settings(max_examples=60, deadline=None)
@given(trees)
def test_node_depths_is_ancestor_count_minus_one(parents):
    depth = node_depths(torch.tensor(parents))
    assert depth.tolist() == [
        len(ancestors_by_walk(list(parents), j)) - 1 for j in range(len(parents))
    ]


@pytest.mark.parametrize("bad", [[0], [-1, 1], [-1, -2], [-1, 0, 3]])
def test_check_parents_rejects_non_topological(bad):
    with pytest.raises(ValueError):
        check_parents(torch.tensor(bad))


def test_mask_is_zero_on_prefix_and_ancestors_only():
    parents = torch.tensor([-1, 0, 0, 1, -1])
    mask = tree_attention_mask(parents, prefix_len=3, dtype=torch.float32)  # [5, 8]
    visible = mask == 0
    assert visible[:, :3].all()
    assert visible[3, 3:].tolist() == [True, True, False, True, False]
    assert visible[4, 3:].tolist() == [False, False, False, False, True]


@pytest.mark.parametrize("h,hkv", [(2, 2), (4, 2), (3, 1)])
@pytest.mark.parametrize("prefix", [0, 5])
def test_reference_matches_per_query_softmax(h, hkv, prefix):
    gen = torch.Generator().manual_seed(h * 10 + prefix)
    parents = [-1, 0, 0, 1, 3, 2, -1, 6]
    n, d = len(parents), 8
    q = torch.randn(2, h, n, d, generator=gen, dtype=torch.float64)
    k = torch.randn(2, hkv, prefix + n, d, generator=gen, dtype=torch.float64)
    v = torch.randn(2, hkv, prefix + n, d, generator=gen, dtype=torch.float64)
    out = tree_attention_reference(q, k, v, torch.tensor(parents), scale=0.3)
    for b in range(2):
        for head in range(h):
            kv = head // (h // hkv)
            for j in range(n):
                keys = list(range(prefix)) + [
                    prefix + i for i in sorted(ancestors_by_walk(parents, j))
                ]
                w = torch.softmax(k[b, kv, keys] @ q[b, head, j] * 0.3, dim=0)
                expected = (w[:, None] * v[b, kv, keys]).sum(0)
                torch.testing.assert_close(out[b, head, j].double(), expected, rtol=1e-5, atol=1e-5)


def test_reference_default_scale_and_dtype():
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, 1, 3, 16, generator=gen).half()
    k = torch.randn(1, 1, 5, 16, generator=gen).half()
    out = tree_attention_reference(q, k, k, torch.tensor([-1, 0, 1]))
    explicit = tree_attention_reference(q, k, k, torch.tensor([-1, 0, 1]), scale=1 / math.sqrt(16))
    assert out.dtype == torch.float16
    assert torch.equal(out, explicit)
