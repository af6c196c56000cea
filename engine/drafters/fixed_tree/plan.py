"""The greedy fixed tree grown on the device with static shapes: one host read per iteration
(engine/iteration/static_tree.py has the iteration, its graph and its price;
engine/draft/growth.py the parts).

The fixed tree (engine/drafters/fixed_tree/build.py: every node of a level gets its `branch` most
probable children, the most probable within the level kept until the node budget is spent)
has a static shape: level l has w_l = min(w_(l-1) * branch, budget - nodes so far) nodes, no
padding, whatever the draft says. Its children are chosen with tensor ops: the level's
candidates' path log-probabilities (float32, as the Python builder computes them), a stable
descending sort (the Python builder's `sorted`, ties in index order), the first w_(l+1) kept
in (parent, rank) order. The tree is node for node the Python builder's, and the output
autoregressive decoding (tests/engine/iteration/test_static_tree_path.py).
"""

from __future__ import annotations

import torch

from engine.draft import DecodeState
from engine.draft.growth import Fed, Level, Plan, feed, pack, root
from engine.drafters.fixed_tree.build import FixedTreeConfig
from tree_kernels.reference import ancestor_matrix


def widths(cfg: FixedTreeConfig, levels: int) -> tuple[int, ...]:
    """Each level's node count below the root, `levels` deep at most (the Python builder's
    loop: it stops where the budget is spent)."""
    out, w = [], 1
    for _ in range(levels):
        room = cfg.budget - sum(out)
        if room <= 0:
            break
        w = min(w * cfg.branch, room)
        out.append(w)
    return tuple(out)


def _children(fed: Fed, width: int) -> Level:
    """The next level's `width` nodes: the most probable of fed's rows' children (stable
    order on ties), in (parent, rank) order."""
    w, b = fed.top_p.shape
    lp = fed.top_p.clamp(min=1e-30).log() + fed.level.lp.float()[:, None]  # [w, B] float32
    order = torch.sort(lp.flatten(), descending=True, stable=True).indices  # [w * B]
    kept = torch.sort(order[:width]).values  # [width] in (parent, rank) order
    return Level(
        tok=fed.top_t.flatten()[kept],
        lp=lp.flatten()[kept],
        valid=torch.ones(width, dtype=torch.bool, device=lp.device),
        par=kept // b,
    )


def grow(lm, scalars, top_p, top_t, *, cfg: FixedTreeConfig, levels: int):
    """The fixed tree below the root on the device, from the root's draft forward (top_p,
    top_t [1, branch]) and scalars [5] float64 (the root's cache slot, position and token at
    0, 1, 4): the tree packed (static_tree.pack) and its ancestor matrix [budget + 1,
    budget + 1]. A function of its tensors and settings only: one graph per (cfg, levels)."""
    sizes = widths(cfg, levels)
    fed = [root(scalars, top_p, top_t)]
    nxt = _children(fed[0], sizes[0])
    offset = 1  # the next free cache slot after the root's
    for depth, width in enumerate(sizes[1:], start=1):
        fed.append(feed(lm, nxt, fed[-1], scalars, offset, depth, cfg.branch))
        offset += nxt.tok.shape[0]
        nxt = _children(fed[-1], width)
    packed, n = pack(fed, nxt, cfg.budget)  # [4, budget + 1], []
    return packed, n, ancestor_matrix(packed[1], check=False, height=len(fed))


def plan(cfg: FixedTreeConfig, state: DecodeState) -> Plan:
    """This iteration's shapes: the tree `depth` deep, or as deep as the tokens left."""
    levels = min(cfg.depth, state.remaining)
    return Plan(cfg.branch, widths(cfg, levels), cfg.branch, {"cfg": cfg, "levels": levels})
