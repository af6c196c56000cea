"""One greedy DynaTree iteration grown on the device with static shapes: one host read.

The general iteration (engine/decode.py `decode_step`) grows DynaTree's tree in Python
(engine/drafters/dynatree.py): each draft forward's top-B_max children come to the host, where
Algorithm 1's gates pick the next level, so an iteration reads the device once per level. Here
the same tree is grown with tensor ops over levels of fixed width, and the host learns it only
with the verification result:

    level 0: the root, fed with the committed tokens the draft has not seen (causal)
    level l: w_l rows, w_(l+1) = min(w_l * B_max, N_max) (paper: w_1 = 1, the root u0), of
             which the first k_l are nodes and the rest padding; each level is one draft
             forward whose rows see the committed prefix, their ancestors and themselves
    children of level l (DynaTree App. D, Algorithm 1, as in engine/drafters/dynatree.py):
        expandable = valid & p(u) >= tau & d(u) < D_max                        (l. 14, 17)
                     [& p(u) >= rho_stop & (d(u) < D0 | p(u) >= rho_deep)]     (l. 20, 23)
        B(u) = B_min if c(u) >= tau_h, B_max if c(u) < tau_l, else B_mid      (l. 26-27)
        candidates: the top-B(u) children of each expandable node, in FIFO-then-rank order
        (l. 28); variant "ours" drops those with p < tau; the first N_max - |T| are kept
        (the budget) and packed to the front of level l + 1 (a cumulative sum, no read)
    target:  one forward over the tree packed into N_max + 1 rows in BFS order (padding rows
             are children of the root that no node sees), returning its argmax per row
    read:    the node count, the target's argmaxes, the tree's tokens, parents and draft
             slots, in one `tolist`; the greedy walk (engine/verify/greedy.py) runs on the host

The tree is node for node the one the Python builder grows (same nodes, same BFS order), and
the output is token for token autoregressive decoding (tests/engine/test_dynatree_step.py).
The price of the static shapes is padding: every level up to the depth limit is fed at its
full width, also after the tree stopped growing, and the target verifies N_max + 1 rows. So
it runs on `engine: compiled` and `graphs` only, whose forwards are graph replays padded to buckets
anyway (each level's width one graph), where the saved host reads are what is left to save.
`engine: fast` keeps the Python builder, which feeds only the expandable nodes: on the CPU a
forward's cost grows with its rows, and on an H100 with eager forwards (bench/gpu_exact.py,
2026-11-26, tiny pairs, 2 prompts x 32 tokens) `engine: fast` with this step took 2.78 s
where `engine: eager` with the Python builder took 0.86 s (llama; neox 2.19 s against 0.66 s):
with launch-bound forwards every fed level costs a full draft forward, and the tiny drafts'
trees stop after one level.
"""

from __future__ import annotations

import functools
import itertools
import math
import time
from typing import NamedTuple

import torch

from engine.cache import sync
from engine.draft import DecodeState, DraftModel
from engine.drafters.dynatree import SAMPLING, DynaTreeConfig, adapted
from engine.transfer import to_device
from engine.tree import Tree, depth_from_parents
from engine.verify import greedy
from kernels.reference import ancestor_matrix


def static_device(target) -> bool:
    """Whether the static-shape growth pays on this target's path: padded graph forwards (see the
    module docstring)."""
    return target.compiled


def applies(target, draft, method, state: DecodeState) -> bool:
    """Whether `method`'s iteration runs here: greedy DynaTree with a draft model on a fast
    (static-cache) path where static_device() holds."""
    return (
        target.fast
        and method.name == "dynatree"
        and method.verifier == "greedy"
        and state.draft_warp.greedy
        and isinstance(draft, DraftModel)
        and not draft.keep_prev
        and static_device(target)
    )


class Level(NamedTuple):
    """One level of the tree being grown: w rows, the first of which are its nodes."""

    tok: torch.Tensor  # [w] long token of each row (0 on padding)
    lp: torch.Tensor  # [w] float64 log p(u), the path's cumulative draft log-probability
    valid: torch.Tensor  # [w] bool: the row is a node
    par: torch.Tensor  # [w] long: the parent's row in the level above


class Fed(NamedTuple):
    """A level after its draft forward."""

    level: Level
    anc: torch.Tensor  # [w, S] bool: the tree slots (root first) each row sees, itself included
    slots: torch.Tensor  # [w] long: the draft cache slot of each row
    top_p: torch.Tensor  # [w, B] float32 the draft's top-B_max probabilities below each row
    top_t: torch.Tensor  # [w, B] long and their tokens


@functools.cache
def _ranks(w: int, b: int, width: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Constants of a level of w rows with B children each, made once per shape: [B] each
    child's rank, [w * B] each child's parent row, [width] the row numbers of the next level."""
    rows = torch.arange(max(b, w * b, width), device=device)
    return rows[:b], rows[: w * b] // b, rows[:width]


@functools.cache
def _eye(w: int, device: torch.device) -> torch.Tensor:
    """[w, w] bool identity (each row of a level sees itself), made once per width."""
    return torch.eye(w, dtype=torch.bool, device=device)


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
    rank, rows, next_rows = _ranks(w, b, width, p.device)  # [B], [w * B], [width]
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


def _feed(draft: DraftModel, level: Level, above: Fed, root_slot: int, position: int, b: int):
    """One draft forward over a level's rows, each seeing the committed prefix, its ancestors
    and itself (padding rows: their parent row's ancestors, seen by no node)."""
    lm, dev = draft.lm, draft.lm.device
    w = level.tok.shape[0]
    anc = torch.cat([above.anc[level.par], _eye(w, dev)], 1)
    visible = torch.cat([torch.ones(w, root_slot, dtype=torch.bool, device=dev), anc], 1)
    slots = torch.arange(lm.length, lm.length + w, device=dev)  # [w]
    positions = torch.full((w,), position, device=dev)
    top_p, top_t = lm.forward(level.tok, positions, visible, top=b)  # [w, B] twice
    return Fed(level, anc, slots, top_p, top_t)


def grow(draft: DraftModel, cfg: DynaTreeConfig, committed: list[int], state: DecodeState):
    """The levels of this iteration's tree (Algorithm 1 on the device; the module docstring):
    [Fed of each fed level] and the last, unfed level."""
    lm, dev = draft.lm, draft.lm.device
    d0, tau_h, tau_l = adapted(cfg, state)  # Phase 3 from the history: Python values
    paper = cfg.variant == "paper"
    lift = 1 if paper else 0  # the paper's depth d(u) of level l is l - lift (root u0 at l = 1)
    max_depth = min(cfg.D_max if cfg.dynamic_depth else d0, state.remaining - lift)
    log_tau = math.log(cfg.tau) if cfg.tau > 0 else -math.inf
    log_stop, log_deep = math.log(cfg.rho_stop), math.log(cfg.rho_deep)
    gates = (tau_h, tau_l, log_tau)

    def expandable(level: Level, d: int) -> torch.Tensor:  # Alg. 1 l. 14-25, [w] bool
        ok = level.valid & (level.lp >= log_tau)
        if d >= max_depth:
            return torch.zeros_like(ok)
        if cfg.dynamic_depth:
            ok &= level.lp >= log_stop
            if d >= d0:
                ok &= level.lp >= log_deep
        return ok

    # the root, fed with the committed tokens the draft has not seen yet (causal)
    if lm.length > lm.committed:
        lm.commit([])
    positions = torch.arange(lm.committed, len(committed), device=dev)  # [n_p + 1]
    pending = to_device(committed[lm.committed :], dev)  # [n_p + 1], the root last
    top_p, top_t = lm.forward(pending, positions, keep=1, top=cfg.B_max)  # [1, B] twice
    lm.committed = len(committed) - 1
    root_slot = lm.committed
    one = torch.ones(1, dtype=torch.bool, device=dev)
    zero = torch.zeros(1, dtype=torch.long, device=dev)
    root = Level(pending[-1:], torch.zeros(1, dtype=torch.float64, device=dev), one, zero)
    fed = [Fed(root, one.view(1, 1), zero + root_slot, top_p, top_t)]
    room = to_device(cfg.N_max, dev)  # [] drafted nodes the budget still allows
    if paper:  # l. 10: the root u0 is the draft's top-1 token after the prefix
        lp0 = top_p[:, 0].double().clamp_min(1e-30).log()
        nxt = Level(top_t[:, 0], lp0, one, zero)
    else:
        width = min(top_p.shape[1], cfg.N_max)
        nxt = _children(cfg, fed[0], expandable(root, 0), gates, width, room)
    room = room - nxt.valid.sum()
    level = 1
    while level - lift < max_depth:  # level `level` may hold expandable nodes: feed it
        fed.append(_feed(draft, nxt, fed[-1], root_slot, state.prefix_len + level, cfg.B_max))
        width = min(nxt.tok.shape[0] * fed[-1].top_p.shape[1], cfg.N_max)
        nxt = _children(cfg, fed[-1], expandable(nxt, level - lift), gates, width, room)
        room = room - nxt.valid.sum()
        level += 1
    return fed, nxt


@functools.cache
def _layout(widths: tuple[int, ...], size: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Constants of the concatenated levels of widths `widths` (made once per shape):
    [R] each row's level (its depth), [R] the first row of the level above (added to a row's
    `par`), [R] 2 at the root and 1 elsewhere (the root's parent comes out -1), and the packed
    rows' initial values [4, size + 1] (tokens 0, parents 0, depth 1, slots -1: padding rows
    are children of the root that no node sees; the last column a dump)."""
    starts = [0, *itertools.accumulate(widths)]
    level = [d for d, w in enumerate(widths) for _ in range(w)]
    above = [starts[max(d - 1, 0)] for d in level]
    first = [2] + [1] * (starts[-1] - 1)
    rows = to_device([level, above, first], device)  # [3, R]
    blank = to_device([[0], [0], [1], [-1]], device).expand(4, size + 1)
    return rows[0], rows[1], rows[2], blank


def pack(fed: list[Fed], last: Level, n_max: int):
    """The tree in BFS order, packed into N_max + 1 rows (node 0 the root, padding rows after
    the nodes: token 0, children of the root, slot -1): (tokens, parents, depth, draft slots,
    node count), all on the device. The levels are concatenated, their nodes first within each
    level, so a node's packed row is the number of nodes before it: one cumulative sum and one
    scatter for the whole tree."""
    levels = [f.level for f in fed] + [last]
    dev, size = last.tok.device, n_max + 1
    widths = tuple(lv.tok.shape[0] for lv in levels)
    depth, above, first, blank = _layout(widths, size, dev)  # [R] each, [4, size + 1]
    valid = torch.cat([lv.valid for lv in levels])  # [R]
    order = valid.cumsum(0)  # [R] 1 + each node's packed row
    parents = order[torch.cat([lv.par for lv in levels]) + above] - first  # [R]
    slots = torch.cat([f.slots for f in fed] + [torch.full_like(last.par, -1)])  # [R]
    rows = torch.stack([torch.cat([lv.tok for lv in levels]), parents, depth, slots])  # [4, R]
    packed = blank.clone()
    dest = torch.where(valid, order - 1, size)  # [R]; size: the dump column
    packed.scatter_(1, dest.expand(4, -1), rows)
    tokens, parents, depth, slots = packed[:, :size]
    return tokens, parents, depth, slots, order[-1]


def dynatree_step(target, draft: DraftModel, cfg: DynaTreeConfig, committed: list[int], state):
    """One iteration (see the module docstring); returns engine.decode.Step."""
    from engine.decode import forward_counters, host_counts, make_step

    lm = draft.lm
    before = forward_counters(target, lm)
    t0 = time.perf_counter()
    fed, last = grow(draft, cfg, committed, state)
    tokens, parents, depth, slots, n = pack(fed, last, cfg.N_max)  # [N_max + 1] each, []
    sync(target.device)
    t1 = time.perf_counter()
    visible = torch.cat(
        [
            torch.ones(tokens.shape[0], state.prefix_len, dtype=torch.bool, device=tokens.device),
            ancestor_matrix(parents, check=False, height=len(fed)),
        ],
        1,
    )  # [N_max + 1, prefix_len + N_max + 1]
    best = target.forward(tokens, state.prefix_len + depth, visible, parents, argmax=True)
    t2 = time.perf_counter()
    read = torch.cat([n.view(1), best, tokens, parents, slots]).tolist()  # the one host read
    size = tokens.shape[0]
    n = read[0]
    best_h, tok_h, par_h, slot_h = (read[1 + i * size : 1 + i * size + n] for i in range(4))
    accept = greedy.walk(best_h, tok_h, par_h)
    draft.builder = None  # DraftModel.commit keeps the accepted nodes the draft has seen
    draft.path_slots = {i: [s] for i, s in enumerate(slot_h) if s >= 0}
    tree = Tree(
        tokens=tokens[:n],
        parents=parents[:n],
        depth=depth[:n],
        sampling=SAMPLING.at(True),
        height=max(depth_from_parents(par_h)),
    )
    counts = host_counts(best_h, tok_h, par_h, accept)
    t3 = time.perf_counter()
    new = [tok_h[i] for i in accept.path] + [accept.token]
    return make_step(target, lm, before, (t0, t1, t2, t3), tree, accept, new, counts)
