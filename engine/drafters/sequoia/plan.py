"""Sequoia's greedy tree grown on the device with static shapes: one host read per iteration
(engine/iteration/static_tree.py has the iteration, its graph and its price;
engine/draft/growth.py the parts).

Sequoia's tree (engine/drafters/sequoia/build.py, Chen et al. 2024, Sec. 3.1) is a static shape: the
children count of every node, from the dynamic program over the acceptance profile. Greedy, the
k-th child of a node is its draft's k-th most probable token, dropped with its subtree where
that probability is 0 (a support exhausted). Here each depth's nodes with children are fed in
one draft forward and the next depth's tokens are gathered from its top-k at index tensors
made once per shape: the tree is node for node the Python builder's
(tests/engine/iteration/test_static_tree_path.py).
"""

from __future__ import annotations

import functools

import torch

from engine.draft import DecodeState
from engine.draft.growth import Level, Plan, feed, pack_levels, root
from engine.drafters.sequoia.build import SequoiaConfig, optimal_shape, vector
from engine.transfer import to_device
from tree_kernels.reference import ancestor_matrix


@functools.cache
def steps(shape: tuple[int, ...], depth: int) -> tuple[tuple[tuple[int, ...], int, tuple], ...]:
    """Per depth d whose layer has nodes with children, d < depth: (the layer's rows that have
    children, in BFS order: the rows fed; the most children of one, the forward's top-k; per
    node of layer d + 1, in BFS order, (its parent's index among the fed rows, its rank)).
    Python tuples: the graph's static shapes."""
    first = [1]  # BFS index of each shape node's first child
    for c in shape[:-1]:
        first.append(first[-1] + c)
    layer, out = [0], []  # the shape nodes of depth d
    while len(out) < depth:
        rows = tuple(i for i, node in enumerate(layer) if shape[node] > 0)
        if not rows:
            break
        kids = tuple((j, k) for j, i in enumerate(rows) for k in range(shape[layer[i]]))
        out.append((rows, max(shape[layer[i]] for i in rows), kids))
        layer = [first[layer[i]] + k for i in rows for k in range(shape[layer[i]])]
    return tuple(out)


@functools.cache
def _index(values: tuple, device: torch.device) -> torch.Tensor:
    """The index tensor of `values`, made once per shape and device: outside a graph's capture
    (its first, eager run), where a copy from the host is no part of a CUDA graph."""
    return to_device(list(values), device)


def grow(lm, scalars, top_p, top_t, *, shape: tuple[int, ...], depth: int):
    """Sequoia's greedy tree below the root on the device, from the root's draft forward
    (top_p, top_t [1, shape[0]]) and scalars [5] float64 (the root's cache slot, position and
    token at 0, 1, 4): the tree packed (static_tree.pack_levels) and its ancestor matrix. A
    function of its tensors and settings only: one graph per (shape, depth)."""
    dev = top_p.device
    layers = steps(shape, depth)
    fed = root(scalars, top_p, top_t)  # the fed rows of layer d (the root's layer first)
    levels, slots = [fed.level], [fed.slots]  # per layer: its rows, their draft slots
    offset = 1  # the next free cache slot after the root's
    for d, (rows, _, kids) in enumerate(layers):
        parent, rank = _index(tuple(zip(*kids)), dev)  # [m] each: index among fed rows, rank
        q = fed.top_p[parent, rank]  # [m] the children's draft probabilities
        layer = Level(
            tok=fed.top_t[parent, rank],
            lp=q,
            valid=fed.level.valid[parent] & (q > 0),  # probability 0: the subtree is dropped
            par=_index(rows, dev)[parent],  # [m] the parent's row in layer d
        )
        levels.append(layer)
        if d + 1 == len(layers):  # the last layer: no forward
            slots.append(torch.full_like(parent, -1))
            break
        nxt_rows, top, _ = layers[d + 1]
        pick = _index(nxt_rows, dev)  # [w] this layer's rows that have children
        fed_level = Level(layer.tok[pick], q[pick], layer.valid[pick], parent[pick])
        fed = feed(lm, fed_level, fed, scalars, offset, d + 1, top)
        offset += pick.shape[0]
        slots.append(torch.full_like(parent, -1).scatter(0, pick, fed.slots))
    packed, n = pack_levels(levels, slots, sum(len(kids) for _, _, kids in layers))
    return packed, n, ancestor_matrix(packed[1], check=False, height=len(layers))


def plan(cfg: SequoiaConfig, state: DecodeState) -> Plan | None:
    """This iteration's shapes: the optimal shape to its depth, or as deep as the tokens left
    (a few graphs, not one per iteration); None for a shape without children (the Python
    builder's root-only tree)."""
    shape = optimal_shape(vector(cfg), cfg.budget, cfg.max_depth)
    depth = min(state.remaining, len(steps(shape, cfg.max_depth)))
    if depth == 0:
        return None
    levels = steps(shape, depth)
    sizes = (*(len(fed) for fed, _, _ in levels[1:]), len(levels[-1][2]))  # fed, then the last
    widest = max(top for _, top, _ in levels)
    return Plan(levels[0][1], sizes, widest, {"shape": shape, "depth": depth})
