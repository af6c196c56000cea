"""The toy method's device plan: the same tree grown with static shapes (engine/draft/growth.py;
engine/iteration/static_tree.py runs it). Level l has k^l rows, all nodes: each row's top-k
children, in (parent, rank) order, the host builder's BFS order."""

from __future__ import annotations

from engine.draft import DecodeState
from engine.draft.growth import Fed, Level, Plan, feed, pack, ranks, root
from tests.engine.drafters.toy.build import ToyConfig
from tree_kernels.reference import ancestor_matrix


def _children(fed: Fed) -> Level:
    w, k = fed.top_t.shape  # [w, k]: each row's top-k
    return Level(
        tok=fed.top_t.flatten(),
        lp=fed.top_p.flatten(),  # unused: the shape is static
        valid=fed.level.valid.repeat_interleave(k),
        par=ranks(w, k, w * k, fed.top_t.device)[1],
    )


def grow(lm, scalars, top_p, top_t, *, k: int, depth: int):
    """The tree below the root from the root's forward (top_p, top_t [1, k]); a function of its
    tensors and settings only (one graph per (k, depth) on `engine: graphs`)."""
    fed = [root(scalars, top_p, top_t)]
    nxt = _children(fed[0])
    offset = 1  # the next free cache slot after the root's
    for d in range(1, depth):
        fed.append(feed(lm, nxt, fed[-1], scalars, offset, d, k))
        offset += nxt.tok.shape[0]
        nxt = _children(fed[-1])
    packed, n = pack(fed, nxt, offset - 1 + nxt.tok.shape[0])  # [4, nodes + 1], []
    return packed, n, ancestor_matrix(packed[1], check=False, height=len(fed))


def plan(cfg: ToyConfig, state: DecodeState) -> Plan | None:
    depth = min(cfg.depth, state.remaining)
    if depth == 0:
        return None  # the root alone: the general iteration
    sizes = tuple(cfg.k ** (d + 1) for d in range(depth))
    return Plan(cfg.k, sizes, cfg.k, {"k": cfg.k, "depth": depth})
