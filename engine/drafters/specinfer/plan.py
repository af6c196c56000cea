"""SpecInfer's greedy expansion tree grown on the device with static shapes: one host read per
iteration (engine/iteration/static_tree.py has the iteration, its graph and its price;
engine/draft/growth.py the parts).

At temperature 0 SpecInfer's tree (engine/drafters/specinfer/build.py, Miao et al. 2024, Sec. 3.1)
gives every node at depth i - 1 its k_i most probable draft tokens: level i has
k_1 * .. * k_i nodes whatever the draft says, so each level's children are a slice of the
draft's top-k_i, in (parent, rank) order, with no selection at all. The tree is node for node
the Python builder's and the output autoregressive decoding
(tests/engine/iteration/test_static_tree_path.py).
"""

from __future__ import annotations

import math

from engine.draft import DecodeState
from engine.draft.growth import Fed, Level, Plan, feed, pack, ranks, root
from engine.drafters.specinfer.build import SpecInferConfig
from tree_kernels.reference import ancestor_matrix


def _children(fed: Fed) -> Level:
    """Every row's top-k children (k: the columns of its forward's top), in (parent, rank)
    order."""
    w, k = fed.top_t.shape
    return Level(
        tok=fed.top_t.flatten(),
        lp=fed.top_p.flatten(),  # unused: the shape is static
        valid=fed.level.valid.repeat_interleave(k),
        par=ranks(w, k, w * k, fed.top_t.device)[1],
    )


def grow(lm, scalars, top_p, top_t, *, widths: tuple[int, ...]):
    """The expansion tree <widths> below the root on the device, from the root's draft
    forward (top_p, top_t [1, k_1]) and scalars [5] float64 (the root's cache slot, position
    and token at 0, 1, 4): the tree packed (static_tree.pack) and its ancestor matrix. A
    function of its tensors and settings only: one graph per widths."""
    fed = [root(scalars, top_p, top_t)]
    nxt = _children(fed[0])
    offset = 1  # the next free cache slot after the root's
    for depth, k in enumerate(widths[1:], start=1):
        fed.append(feed(lm, nxt, fed[-1], scalars, offset, depth, k))
        offset += nxt.tok.shape[0]
        nxt = _children(fed[-1])
    n_max = offset - 1 + nxt.tok.shape[0]  # every node drafted
    packed, n = pack(fed, nxt, n_max)  # [4, n_max + 1], []
    return packed, n, ancestor_matrix(packed[1], check=False, height=len(fed))


def plan(cfg: SpecInferConfig, state: DecodeState) -> Plan:
    """This iteration's shapes: <k_1, .., k_m> cut to the tokens left."""
    widths = cfg.widths[: state.remaining]
    sizes = tuple(math.prod(widths[: i + 1]) for i in range(len(widths)))
    return Plan(widths[0], sizes, max(widths), {"widths": widths})
