"""Property tests on random trees: topological order, mask == ancestor relation, positions."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.tree import Tree, ancestor_matrix, ancestor_rows, dfs_preorder, make_tree
from tests.trees import parent_arrays
from tree_kernels.reorder import dfs_order


@st.composite
def random_trees(draw):
    parents = draw(parent_arrays(40))
    tokens = draw(st.lists(st.integers(0, 99), min_size=len(parents), max_size=len(parents)))
    return make_tree(tokens, parents)


def brute_ancestors(parents: list[int], i: int) -> set[int]:
    out = {i}
    while parents[i] >= 0:
        i = parents[i]
        out.add(i)
    return out


@settings(max_examples=150, deadline=None)
@given(random_trees(), st.integers(0, 50))
def test_mask_is_the_ancestor_relation(tree: Tree, prefix_len: int):
    parents = tree.parents.tolist()
    n = tree.size
    assert all(parents[i] < i for i in range(1, n)) and parents[0] == -1
    mask = tree.attention_mask(prefix_len)
    assert mask.shape == (1, 1, n, prefix_len + n)
    visible = mask[0, 0] == 0
    assert visible[:, :prefix_len].all(), "every node sees the whole committed prefix"
    for i in range(n):
        expect = brute_ancestors(parents, i)
        got = set(torch.nonzero(visible[i, prefix_len:]).flatten().tolist())
        assert got == expect
    hidden = mask[0, 0][~visible]
    assert (hidden == torch.finfo(torch.float32).min).all()


@settings(max_examples=150, deadline=None)
@given(random_trees(), st.integers(0, 50))
def test_position_ids_are_prefix_plus_depth(tree: Tree, prefix_len: int):
    parents = tree.parents.tolist()
    pos = tree.position_ids(prefix_len)[0].tolist()
    for i in range(tree.size):
        assert pos[i] == prefix_len + len(brute_ancestors(parents, i)) - 1


@settings(max_examples=100, deadline=None)
@given(random_trees())
def test_children_and_paths_are_consistent(tree: Tree):
    parents = tree.parents.tolist()
    for i in range(tree.size):
        assert tree.children(i) == [j for j in range(tree.size) if parents[j] == i]
        path = tree.path_to(i)
        assert len(path) == int(tree.depth[i])
        assert ([0] + path)[-1] == i
        for a, b in zip([0] + path, path):
            assert parents[b] == a


@settings(max_examples=100, deadline=None)
@given(parent_arrays(80))
def test_host_ancestor_rows_equal_pointer_doubling(parents: list[int]):
    """The mask of a tree with host parents (ancestor_rows, numpy) is the device one's."""
    assert torch.equal(ancestor_rows(parents), ancestor_matrix(torch.tensor(parents)))
    tree = make_tree(list(range(len(parents))), parents)
    assert tree.host_parents == tuple(parents)
    device_only = Tree(tree.tokens, tree.parents, tree.depth)  # no host parents
    assert torch.equal(tree.visibility(7), device_only.visibility(7))


def test_ancestor_matrix_on_a_deep_chain():
    n = 300  # pointer doubling must cover depth 299
    anc = ancestor_matrix(torch.arange(-1, n - 1))
    assert torch.equal(anc, torch.ones(n, n, dtype=torch.bool).tril())


@pytest.mark.parametrize("parents", [[0], [-1, 1], [-1, 0, 3, 1], [-1, -1]])
def test_make_tree_rejects_non_topological_parents(parents):
    with pytest.raises(ValueError):
        make_tree(list(range(len(parents))), parents)


def test_tree_rejects_bad_sampling_and_q_shape():
    with pytest.raises(ValueError):
        make_tree([1, 2], [-1, 0], sampling="beam")
    with pytest.raises(ValueError):
        make_tree([1, 2], [-1, 0], q=torch.zeros(3, 5))


@settings(max_examples=100, deadline=None)
@given(parent_arrays(60))
def test_dfs_preorder_is_the_kernels_dfs_order_on_host_lists(parents):
    """DySpec numbers its tree with dfs_preorder (App. C): the order of tree_kernels/reorder.py
    dfs_order(heavy_first=False), every parent before its children, each node once."""
    order = dfs_preorder(parents)
    assert order == dfs_order(torch.tensor(parents), heavy_first=False).tolist()
    assert sorted(order) == list(range(len(parents)))
    position = {node: i for i, node in enumerate(order)}
    assert all(position[parents[i]] < position[i] for i in range(1, len(parents)))
