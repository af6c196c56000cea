"""DySpec DFS / heavy-path-first reorder (App. C) and the host-side block tables.

No Triton needed: the tables are what the kernel reads, so checking them against the dense
mask checks which tiles the kernel computes (the kernel tests check it skips the rest).
"""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.trees import parent_arrays, random_bushy_tree
from tree_kernels.block_mask import (
    BLOCK_M,
    BLOCK_N,
    block_visibility,
    tree_masks,
    unpack_bits,
    visible_block_count,
)
from tree_kernels.reference import ancestor_matrix, node_depths
from tree_kernels.reorder import dfs_order, inverse_permutation, permute_tree, subtree_sizes

trees = parent_arrays(60, forest=True)


def dense_tile_visibility(parents: torch.Tensor, bm: int, bn: int) -> torch.Tensor:
    """Tile table by looping over tiles of the dense mask: the independent oracle."""
    anc = ancestor_matrix(parents)
    n = anc.shape[0]
    table = torch.zeros(-(-n // bm), -(-n // bn), dtype=torch.bool)
    for qb in range(table.shape[0]):
        for kb in range(table.shape[1]):
            table[qb, kb] = anc[qb * bm : (qb + 1) * bm, kb * bn : (kb + 1) * bn].any()
    return table


@settings(max_examples=60, deadline=None)
@given(trees, st.booleans())
def test_dfs_order_is_a_topological_preorder(parents, heavy_first):
    parents = torch.tensor(parents)
    n = parents.numel()
    perm = dfs_order(parents, heavy_first=heavy_first)
    assert sorted(perm.tolist()) == list(range(n))
    new_parents = permute_tree(parents, perm)
    assert (new_parents < torch.arange(n)).all()
    # Preorder: the subtree of new node i is exactly the range [i, i + size).
    size = subtree_sizes(new_parents)
    anc = ancestor_matrix(new_parents)
    for i in range(n):
        assert anc[:, i].nonzero().flatten().tolist() == list(range(i, i + int(size[i])))
    # Same tree: ancestor relation and depths carried over by the permutation.
    assert torch.equal(anc, ancestor_matrix(parents)[perm][:, perm])
    assert torch.equal(node_depths(new_parents), node_depths(parents)[perm])


@settings(max_examples=40, deadline=None)
@given(trees)
def test_heavy_first_visits_children_by_descending_subtree_size(parents):
    new_parents = permute_tree(torch.tensor(parents), dfs_order(torch.tensor(parents)))
    size = subtree_sizes(new_parents)
    for p in [-1] + list(range(len(parents))):
        kids = (new_parents == p).nonzero().flatten()  # ascending new index = visiting order
        assert (size[kids][:-1] >= size[kids][1:]).all()


def test_inverse_permutation_round_trip():
    perm = torch.randperm(50, generator=torch.Generator().manual_seed(0))
    inv = inverse_permutation(perm)
    x = torch.randn(3, 50, 4)
    assert torch.equal(x.index_select(1, perm).index_select(1, inv), x)
    assert torch.equal(perm[inv], torch.arange(50))


def test_dfs_order_small_example():
    # BFS numbering: 0 -> (1, 2), 1 -> (3, 4, 5), 2 -> 6; heavy child 1 first.
    parents = torch.tensor([-1, 0, 0, 1, 1, 1, 2])
    assert dfs_order(parents).tolist() == [0, 1, 3, 4, 5, 2, 6]
    parents = torch.tensor([-1, 0, 0, 2, 2, 3])  # node 2 heavier than node 1
    assert dfs_order(parents).tolist() == [0, 2, 3, 5, 4, 1]
    assert dfs_order(parents, heavy_first=False).tolist() == [0, 1, 2, 3, 5, 4]


@settings(max_examples=40, deadline=None)
@given(trees, st.sampled_from([(32, 32), (16, 8), (4, 4)]))
def test_block_visibility_matches_dense_tiles(parents, blocks):
    parents = torch.tensor(parents)
    assert torch.equal(block_visibility(parents, *blocks), dense_tile_visibility(parents, *blocks))


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 200), st.integers(0, 2**31 - 1))
def test_tree_masks_pack_the_ancestor_matrix(n, seed):
    parents = random_bushy_tree(n, 10, torch.Generator().manual_seed(seed))
    masks = tree_masks(parents)
    assert masks.bits.dtype == torch.int32
    assert torch.equal(unpack_bits(masks.bits, n), ancestor_matrix(parents))
    table = dense_tile_visibility(parents, BLOCK_M, BLOCK_N)
    assert masks.counts.tolist() == table.sum(1).tolist()
    for qb in range(table.shape[0]):
        listed = masks.blocks[qb, : masks.counts[qb]].tolist()
        assert listed == table[qb].nonzero().flatten().tolist()


def test_random_bushy_tree_shape():
    gen = torch.Generator().manual_seed(1)
    for n, depth in [(1, 8), (5, 8), (64, 8), (2048, 16)]:
        parents = random_bushy_tree(n, depth, gen)
        assert parents.shape == (n,) and parents[0] == -1 and (parents[1:] >= 0).all()
        assert (parents < torch.arange(n)).all()
        assert int(node_depths(parents).max()) == min(depth, n - 1)
        assert (torch.diff(node_depths(parents)) >= 0).all()  # BFS numbering


@pytest.mark.parametrize("n", [128, 300, 1024])
def test_reorder_makes_more_tiles_fully_masked(n):
    """DySpec App. C: on bushy BFS-numbered trees the DFS order leaves fewer visible tiles
    (more fully masked key blocks), for every one of 10 random trees per size."""
    gen = torch.Generator().manual_seed(n)
    for _ in range(10):
        parents = random_bushy_tree(n, int(torch.randint(8, 17, (1,), generator=gen)), gen)
        before = visible_block_count(parents)
        after = visible_block_count(permute_tree(parents, dfs_order(parents)))
        assert after < before, (before, after)
