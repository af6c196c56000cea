"""DySpec block-sparsity friendly node order (DySpec Appendix C, Definition 1).

A block-sparse attention kernel pays for every (query block, key block) tile that holds
at least one visible pair. Drafters emit trees level by level (BFS order), which spreads
each root-to-leaf path over many blocks. DySpec renumbers the nodes in depth-first order;
visiting the children of a node in descending subtree size is heavy path decomposition
order (Sleator & Tarjan), which App. C names as the near-optimal order that DFS
approximates. Long paths then sit in few blocks and more tiles are fully masked.

Conventions: ``perm[new] = old`` (the reordered tree lists old node ``perm[0]`` first),
so ``x_new = x.index_select(dim, perm)`` and ``x = x_new.index_select(dim, inv)`` with
``inv = inverse_permutation(perm)``.
"""

from __future__ import annotations

import torch

from tree_kernels.reference import check_parents, node_depths


def inverse_permutation(perm: torch.Tensor) -> torch.Tensor:
    """inv with ``inv[perm[i]] = i``; maps reordered outputs back:
    ``out = out_new[..., inv, :]``."""
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(perm.numel(), device=perm.device, dtype=perm.dtype)
    return inv


def permute_tree(parents: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    """Parents of the reordered tree: node ``new`` is old node ``perm[new]``, parents remapped."""
    inv = inverse_permutation(perm)
    old_parents = parents[perm]  # [N] parent (old numbering) of each new node
    return torch.where(old_parents >= 0, inv[old_parents.clamp(min=0)], old_parents)


def subtree_sizes(parents: torch.Tensor) -> torch.Tensor:
    """Number of nodes in the subtree of every node (itself included), LongTensor[N]."""
    parents = parents.long()
    n = parents.numel()
    depth = node_depths(parents)  # [N]
    size = torch.ones(n, dtype=torch.long, device=parents.device)  # [N]
    for level in range(int(depth.max()) if n else 0, 0, -1):
        nodes = (depth == level).nonzero().squeeze(1)
        size.index_add_(0, parents[nodes], size[nodes])
    return size


def dfs_order(parents: torch.Tensor, heavy_first: bool = True) -> torch.Tensor:
    """DFS preorder permutation ``perm`` (LongTensor[N], ``perm[new] = old``).

    Children of one node are visited in descending subtree size when ``heavy_first``
    (heavy path first; ties keep the original order), else in their original order.
    Nodes with parent -1 are children of one virtual root. A preorder puts every parent
    before its children, so the reordered tree is again in topological order.

    Vectorised: the position of a node is its parent's position + 1 + the sizes of the
    siblings visited before it; the python loop runs over depth levels only.
    """
    check_parents(parents)
    parents = parents.long()
    n = parents.numel()
    dev = parents.device
    if n == 0:
        return torch.zeros(0, dtype=torch.long, device=dev)
    depth = node_depths(parents)  # [N]
    size = subtree_sizes(parents)  # [N]
    par = torch.where(parents >= 0, parents, n)  # [N] virtual root is node n

    # Sort nodes by (parent, sibling rank): stable sorts, least significant key first.
    order = torch.arange(n, device=dev)  # [N]
    if heavy_first:
        order = order[torch.sort(-size[order], stable=True).indices]
    order = order[torch.sort(par[order], stable=True).indices]
    sizes_sorted = size[order]  # [N]
    before = torch.cumsum(sizes_sorted, 0) - sizes_sorted  # [N] exclusive cumsum, global
    par_sorted = par[order]
    starts = torch.ones(n, dtype=torch.bool, device=dev)
    starts[1:] = par_sorted[1:] != par_sorted[:-1]
    group_start = torch.cummax(torch.where(starts, torch.arange(n, device=dev), 0), 0).values
    offset = torch.empty(n, dtype=torch.long, device=dev)  # [N] sizes of earlier siblings
    offset[order] = before - before[group_start]

    pos = torch.full((n + 1,), -1, dtype=torch.long, device=dev)  # [N + 1], virtual root at -1
    for level in range(int(depth.max()) + 1):
        nodes = (depth == level).nonzero().squeeze(1)
        pos[nodes] = pos[par[nodes]] + 1 + offset[nodes]
    perm = torch.empty(n, dtype=torch.long, device=dev)
    perm[pos[:n]] = torch.arange(n, device=dev)
    return perm
