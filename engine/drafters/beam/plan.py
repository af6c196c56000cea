"""EAGLE-2's beam-search tree grown on the device with static shapes: one host read per
iteration (engine/iteration/static_tree.py has the iteration, its graph and its price;
engine/draft/growth.py the parts).

The beam tree (engine/drafters/beam/build.py, SALF paper App. B) has static shapes: depth 0's pool
is the root's top_k children; at every further depth the top_k candidates of the deepest pool
layer by V_n (the product of the draft probabilities along the path, float64 as the Python
builder multiplies them) are fed, one draft forward, and their top_k children each are the
next pool layer (top_k^2 rows); the tree is the N candidates of the whole pool with the
highest V_n. Every choice is a stable descending sort (the Python builder's `sorted`: the
earlier candidate first among ties), so the tree is node for node the Python builder's, in
BFS order instead of its pool order (tests/engine/iteration/test_static_tree_path.py).
"""

from __future__ import annotations

import torch

from engine.draft import DecodeState
from engine.draft.growth import Level, Plan, feed, pack_levels, ranks, root
from engine.drafters.beam.build import BeamConfig
from tree_kernels.reference import ancestor_matrix


def _best(v: torch.Tensor, k: int) -> torch.Tensor:
    """[k] the indices of v's k largest values, the earlier first among ties, in index order."""
    return torch.sort(torch.sort(v, descending=True, stable=True).indices[:k]).values


def grow(lm, scalars, top_p, top_t, *, cfg: BeamConfig, depth: int):
    """The beam tree below the root on the device, from the root's draft forward (top_p,
    top_t [1, top_k]) and scalars [5] float64 (the root's cache slot, position and token at
    0, 1, 4): the tree packed (static_tree.pack_levels, min(N, pool) + 1 rows) and its
    ancestor matrix. A function of its tensors and settings only: one graph per (cfg, depth)."""
    k, dev = cfg.top_k, top_p.device
    fed = start = root(scalars, top_p, top_t)
    every = torch.ones(k * k, dtype=torch.bool, device=dev)  # [k * k] valid rows (a view each)
    v = top_p.double().flatten()  # [k] V_n of pool layer 0, the root's children
    pool = [Level(top_t.flatten(), v, every[:k], torch.zeros(k, dtype=torch.long, device=dev))]
    slots = [fed.slots]  # per tree level (the root's, then each pool layer's): draft slots
    for d in range(1, depth):
        layer = pool[-1]
        sel = _best(layer.lp, k)  # [k] the deepest layer's top_k, in pool order
        level = Level(layer.tok[sel], layer.lp[sel], every[:k], sel // k)  # par: a fed row above
        fed = feed(lm, level, fed, scalars, 1 + (d - 1) * k, d, k)  # their top_k children each
        slots.append(torch.full_like(layer.par, -1).scatter(0, sel, fed.slots))
        v = (level.lp[:, None] * fed.top_p.double()).flatten()  # [k * k] V_n
        par = sel[ranks(k, k, k * k, dev)[1]]  # [k * k] each child's row in `layer`
        pool.append(Level(fed.top_t.flatten(), v, every, par))
    slots.append(torch.full_like(pool[-1].par, -1))  # the last pool layer is not fed
    best = _best(torch.cat([lv.lp for lv in pool]), cfg.N)  # the re-ranking
    keep = torch.zeros(sum(lv.tok.shape[0] for lv in pool), dtype=torch.bool, device=dev)
    keep = keep.scatter(0, best, True)  # a scalar write: no host tensor inside a capture
    cuts = keep.split([lv.tok.shape[0] for lv in pool])
    levels = [start.level] + [lv._replace(valid=kept) for lv, kept in zip(pool, cuts)]
    packed, n = pack_levels(levels, slots, min(cfg.N, keep.shape[0]))  # [4, <= N + 1], []
    return packed, n, ancestor_matrix(packed[1], check=False, height=depth)


def plan(cfg: BeamConfig, state: DecodeState) -> Plan:
    """This iteration's shapes: `depth` pool layers, or as many as the tokens left; the fed
    layers have top_k rows, the last pool layer top_k^2 (top_k at depth 1)."""
    depth, k = min(cfg.depth, state.remaining), cfg.top_k
    sizes = (k,) * (depth - 1) + (k * k if depth > 1 else k,)
    return Plan(k, sizes, k, {"cfg": cfg, "depth": depth})
