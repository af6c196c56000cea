"""Greedy DynaTree (App. D, Algorithm 1) grown on the device with static shapes: one host read
per iteration (engine/iteration/static_tree.py has the iteration, its graph and its price;
engine/draft/growth.py the parts).

The Python builder (engine/drafters/dynatree/build.py) grows the tree level by level on the host.
Here level l has w_l rows, w_(l+1) = min(w_l * B_max, N_max) (paper: w_1 = 1, the root u0),
of which the first k_l are nodes and the rest padding, and the children of level l are chosen
with tensor ops (Algorithm 1, as in the Python builder):

    expandable = valid & p(u) >= tau & d(u) < D_max                        (l. 14, 17)
                 [& p(u) >= rho_stop & (d(u) < D0 | p(u) >= rho_deep)]     (l. 20, 23)
    B(u) = B_min if c(u) >= tau_h, B_max if c(u) < tau_l, else B_mid      (l. 26-27)
    candidates: the top-B(u) children of each expandable node, in FIFO-then-rank order
    (l. 28); variant "ours" drops those with p < tau; the first N_max - |T| are kept (the
    budget) and packed to the front of level l + 1 (a cumulative sum, no read)

Phase 3 (history adaptation) sets d0, tau_h and tau_l on the host before the iteration: d0
is a setting of the graph (one per value), tau_h and tau_l come in as device scalars. The tree
is node for node the one the Python builder grows (same nodes, same BFS order), and the output
is token for token autoregressive decoding (tests/engine/iteration/test_dynatree_static_path.py).
Device ops an iteration launches outside replays, measured: docs/gpu.md.
"""

from __future__ import annotations

import math

import torch

from engine.draft import DecodeState
from engine.draft.growth import Fed, Level, Plan, feed, pack, ranks, root
from engine.drafters.dynatree.build import DynaTreeConfig, adapted
from tree_kernels.reference import ancestor_matrix


def _children(
    cfg: DynaTreeConfig, fed: Fed, expandable: torch.Tensor, gates, width: int, room
) -> Level:
    """Level l + 1 from fed level l (Algorithm 1 l. 26-28, the budget N_max); see the module
    docstring. expandable [w] bool; room [] long: nodes the budget still allows."""
    p = fed.top_p.double()  # [w, B]: the Python builder's float64 values (dynatree._top)
    w, b = p.shape
    tau_h, tau_l, log_tau = gates
    c = p[:, 0]  # [w] c(u), the draft's top probability below u
    if cfg.dynamic_breadth:  # l. 27
        breadth = torch.where(c >= tau_h, cfg.B_min, torch.where(c < tau_l, cfg.B_max, cfg.B_mid))
    else:
        breadth = torch.full_like(fed.top_t[:, 0], cfg.B_mid)
    rank, rows, next_rows = ranks(w, b, width, p.device)  # [B], [w * B], [width]
    cand = expandable[:, None] & (rank[None, :] < breadth[:, None])  # [w, B]
    lp = fed.level.lp[:, None] + p.clamp_min(1e-30).log()  # [w, B] log p of each child
    if cfg.variant == "ours":  # a child below tau is dropped, not kept as a leaf
        cand &= lp >= log_tau
    cand = cand.flatten()  # FIFO, then rank order
    order = cand.cumsum(0)  # [w * B] the rank of each candidate among them, from 1
    keep = cand & (order <= room)
    dest = torch.where(keep, order - 1, width)  # [w * B]; width: a dump slot past the end
    return Level(
        tok=fed.top_t.new_zeros(width + 1).scatter_(0, dest, fed.top_t.flatten())[:width],
        lp=lp.new_zeros(width + 1).scatter_(0, dest, lp.flatten())[:width],
        valid=next_rows < keep.sum(),
        par=rows.new_zeros(width + 1).scatter_(0, dest, rows)[:width],
    )


def widths(cfg: DynaTreeConfig, max_depth: int) -> tuple[int, ...]:
    """The rows of each fed level below the root, and last the unfed level's (Python ints:
    the static shapes of one iteration, see the module docstring)."""
    lift = 1 if cfg.variant == "paper" else 0
    w = 1 if lift else min(cfg.B_max, cfg.N_max)  # level 1: u0 (l. 10), or the root's children
    out = [w]
    for _ in range(1, max_depth + lift):  # levels 1 .. max_depth - 1 + lift are fed
        w = min(w * cfg.B_max, cfg.N_max)
        out.append(w)
    return tuple(out)


def grow(lm, scalars, top_p, top_t, *, cfg: DynaTreeConfig, d0: int, max_depth: int):
    """Algorithm 1 below the root on the device (see the module docstring), from the root's
    draft forward (top_p, top_t [1, B_max]) and scalars [5] float64 (the root's cache slot and
    position, Phase 3's tau_h and tau_l, the root's token): the tree packed (static_tree.pack),
    and its ancestor matrix [N_max + 1, N_max + 1]. A function of its tensors and settings
    only: one graph per (cfg, d0, max_depth) on `engine: graphs`
    (engine/iteration/static_tree.py)."""
    dev = top_p.device
    lift = 1 if cfg.variant == "paper" else 0  # the paper's depth d(u) of level l is l - lift
    log_tau = math.log(cfg.tau) if cfg.tau > 0 else -math.inf
    log_stop, log_deep = math.log(cfg.rho_stop), math.log(cfg.rho_deep)
    gates = (scalars[2], scalars[3], log_tau)

    def expandable(level: Level, d: int) -> torch.Tensor:  # Alg. 1 l. 14-25, [w] bool
        ok = level.valid & (level.lp >= log_tau)
        if d >= max_depth:
            return torch.zeros_like(ok)
        if cfg.dynamic_depth:
            ok &= level.lp >= log_stop
            if d >= d0:
                ok &= level.lp >= log_deep
        return ok

    fed = [root(scalars, top_p, top_t)]
    one, zero = fed[0].level.valid, fed[0].level.par  # [1] True, [1] 0
    room = torch.full((), cfg.N_max, device=dev)  # [] drafted nodes the budget still allows
    sizes = widths(cfg, max_depth)
    if lift:  # l. 10: the root u0 is the draft's top-1 token after the prefix
        nxt = Level(top_t[:, 0], top_p[:, 0].double().clamp_min(1e-30).log(), one, zero)
    else:
        nxt = _children(cfg, fed[0], expandable(fed[0].level, 0), gates, sizes[0], room)
    room = room - nxt.valid.sum()
    offset = 1  # the next free cache slot after the root's
    for level, width in enumerate(sizes[1:], start=1):  # level `level` may hold expandable nodes
        fed.append(feed(lm, nxt, fed[-1], scalars, offset, level, cfg.B_max))
        offset += nxt.tok.shape[0]
        nxt = _children(cfg, fed[-1], expandable(nxt, level - lift), gates, width, room)
        room = room - nxt.valid.sum()
    packed, n = pack(fed, nxt, cfg.N_max)  # [4, N_max + 1], []
    return packed, n, ancestor_matrix(packed[1], check=False, height=len(fed))


def plan(cfg: DynaTreeConfig, state: DecodeState) -> Plan:
    """This iteration's shapes: Phase 3 (history adaptation) sets d0, tau_h and tau_l on the
    host; d0 and the depth limit are graph settings, tau_h and tau_l device scalars."""
    d0, tau_h, tau_l = adapted(cfg, state)
    lift = 1 if cfg.variant == "paper" else 0
    max_depth = min(cfg.D_max if cfg.dynamic_depth else d0, state.remaining - lift)
    settings = {"cfg": cfg, "d0": d0, "max_depth": max_depth}
    sizes = widths(cfg, max_depth)
    return Plan(cfg.B_max, sizes, cfg.B_max, settings, (tau_h, tau_l))
