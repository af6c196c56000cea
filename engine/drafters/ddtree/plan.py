"""DDTree's optimal tree grown on the device with static shapes: one host read per iteration
(engine/iteration/static_tree.py has the iteration, its graph and its price;
engine/draft/growth.py the parts).

With the autoregressive block drafter (engine/drafters/ddtree/build.py ARBlockDrafter, greedy) the
per-depth marginals q_1..q_L come from the draft's greedy chain: the root's forward gives q_1,
and each chain node y_d (the top token of q_d) is fed alone, one draft forward, giving q_(d+1).
The tree is then the B most probable prefixes under prod_i q_i (Prop. 2), which Algorithm 1
pops best-first. Here the same set is selected level by level with tensor ops, on a static
shape of B rows per depth:

    depth 1:  the K = B ranks of q_1, prefix score sigma = log q_1^(r)
    depth d:  the children of depth d-1's B kept prefixes, sigma(parent) + log q_d^(r);
              kept: the B best by (sigma descending, rank tuple ascending), found among the
              ~B ln B children that can be (_pairs) rather than all B * K
    tree:     the B best of all depths' kept prefixes by (sigma descending, depth, rank tuple)

The kept prefixes of a depth stay in rank-tuple (lexicographic) order, so a stable descending
sort breaks ties by depth, then rank tuple. A prefix's parent has a larger or equal sigma and a
smaller depth, so every prefix of the B best has its parent among them and among the kept ones
of its depth: the tree is prefix-closed and the per-depth cut loses none of it. Algorithm 1's
heap (engine/drafters/ddtree/build.py best_first) orders its entries by the same key, so both pop
the same B prefixes, node for node (tests/engine/drafters/test_ddtree_plan.py). Row 0 of every depth
is the chain node when it is kept (the largest sigma of its depth, the smallest rank tuple),
which keeps the cache slot its feed wrote.
"""

from __future__ import annotations

import functools

import torch

from engine.draft import DecodeState
from engine.draft.growth import Level, Plan, feed, pack_levels, root
from engine.drafters.ddtree.build import DDTreeConfig
from tree_kernels.reference import ancestor_matrix


@functools.cache
def _pairs(b: int, k: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The candidates that can be among a depth's b best, made once per shape: (j, r) with
    (j + 1)(r + 1) <= b, j the parent's place by sigma, r the rank ([P] each, P ~ b ln b).
    The j + 1 parents up to j and the r + 1 ranks up to r make (j + 1)(r + 1) - 1 other
    candidates that come first in (sigma descending, rank tuple) order, so any other pair has
    b before it."""
    pairs = [(j, r) for j in range(b) for r in range(min(k, b // (j + 1)))]
    return tuple(torch.tensor(c, dtype=torch.long, device=device) for c in zip(*pairs))


def _children(above: Level, lq: torch.Tensor, tok: torch.Tensor, b: int) -> Level:
    """The b best children of a depth's kept prefixes (above: b rows in rank-tuple order;
    lq, tok [K] this depth's log q and tokens), in rank-tuple order: the candidates of _pairs,
    sorted by rank tuple, then stably by sigma descending, the first b, sorted back."""
    k = lq.shape[0]
    j, r = _pairs(b, k, lq.device)  # [P] each
    rows = torch.sort(above.lp, descending=True, stable=True).indices[j]  # [P] parent rows
    cand = torch.sort(rows * k + r).values  # [P] each candidate's (parent row, rank) index
    score = above.lp[cand // k] + lq[cand % k]  # [P] sigma (-inf for zero probabilities)
    best = torch.sort(cand[torch.sort(score, descending=True, stable=True).indices[:b]]).values
    every = torch.ones_like(best, dtype=torch.bool)  # select marks the tree's nodes
    return Level(tok[best % k], above.lp[best // k] + lq[best % k], every, best // k)


def grow(lm, scalars, top_p, top_t, *, cfg: DDTreeConfig, levels: int):
    """DDTree's tree below the root on the device, from the root's draft forward (top_p, top_t
    [1, B]: q_1's top B) and scalars [5] float64 (the root's cache slot, position and token at
    0, 1, 4): the chain's `levels` - 1 one-row feeds, the selection (module docstring), the
    tree packed (static_tree.pack_levels, B + 1 rows) and its ancestor matrix. A function of
    its tensors and settings only: one graph per (cfg, levels)."""
    b, dev = cfg.B, top_p.device
    fed = [root(scalars, top_p, top_t)]
    logq = [top_p[0].double().log()]  # [B] per depth: log q_d^(r), as best_first reads them
    toks = [top_t[0]]
    for depth in range(1, levels):  # the chain: y_depth, the top token below the last
        node = fed[0].level._replace(tok=fed[-1].top_t[0, :1])  # one row, parent row 0
        fed.append(feed(lm, node, fed[-1], scalars, depth, depth, b))  # slot root + depth
        logq.append(fed[-1].top_p[0].double().log())
        toks.append(fed[-1].top_t[0])
    none = torch.full((b,), -1, dtype=torch.long, device=dev)
    chain = [f.slots for f in fed[1:]]  # [1] each: the chain node's slot, row 0 of its depth
    slots = [fed[0].slots] + [torch.cat([s, none[1:]]) for s in chain] + [none]
    packed, n = pack_levels([fed[0].level, *select(logq, toks, b)], slots, b)  # [4, B + 1], []
    return packed, n, ancestor_matrix(packed[1], check=False, height=levels)


def select(logq: list[torch.Tensor], toks: list[torch.Tensor], b: int) -> list[Level]:
    """The B most probable prefixes (module docstring) from each depth's log q_d^(r) and tokens
    ([K] each, ranks descending, K >= B; grow has K = B): per depth B rows in rank-tuple
    order, `valid` marking the tree's nodes, `par` a row of the depth above."""
    first = toks[0][:b]  # depth 1: the first B ranks
    kept = [Level(first, logq[0][:b], torch.ones_like(first, dtype=torch.bool), first * 0)]
    for lq, tok in zip(logq[1:], toks[1:]):
        kept.append(_children(kept[-1], lq, tok, b))
    lp = torch.cat([lv.lp for lv in kept])  # [L * B] in (depth, rank tuple) order
    best = torch.sort(lp, descending=True, stable=True).indices[:b]
    keep = torch.zeros_like(lp, dtype=torch.bool).scatter(0, best, True)
    return [lv._replace(valid=c) for lv, c in zip(kept, keep.split(b))]


def plan(cfg: DDTreeConfig, state: DecodeState) -> Plan | None:
    """This iteration's shapes: the chain's L - 1 one-row feeds (or as many as the tokens left
    allow), the root's top B; None for the trained block drafter (no draft chain)."""
    if cfg.drafter != "ar":
        return None
    levels = min(cfg.L, state.remaining)
    return Plan(cfg.B, (1,) * (levels - 1) + (cfg.B,), cfg.B, {"cfg": cfg, "levels": levels})
