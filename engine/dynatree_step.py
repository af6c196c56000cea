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

Everything below the root (`grow`: the levels' draft forwards, the gates and the packing) is a
function of device tensors and settings only: the root's cache slot, position and token and
Phase 3's thresholds come in as one float64 tensor, each level's mask over all cache slots is
built from the root's slot, and each level's rows go to the slots after the root's. On `engine:
graphs` it is recorded whole, draft forwards included, as one CUDA graph per (config, d0, depth
limit) and replayed (StaticCachedModel.graphed): an iteration launches the root's forward, that
graph, the target's forward and a few copies (bench/gpu_exact.py, tiny llama pair: 24 device
ops per iteration outside replays, where the tree building between per-level replays launched
359). The draft's forward seconds then count the tree building recorded with its forwards.

The tree is node for node the one the Python builder grows (same nodes, same BFS order), and
the output is token for token autoregressive decoding (tests/engine/test_dynatree_step.py,
on `graphs` also with the graph replayed from a make_fx record, which keeps any host value
read at capture as a CUDA graph does).
The price of the static shapes is padding: every level up to the depth limit is fed at its
full width, also after the tree stopped growing, and the target verifies N_max + 1 rows. So
it runs on `engine: compiled` and `graphs` only, whose forwards are graph replays anyway,
where the saved host reads and launches are what is left to save.
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
from engine.tree import Tree, additive_mask, depth_from_parents
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


def _feed(lm, level: Level, above: Fed, scalars, offset: int, depth: int, b: int) -> Fed:
    """One draft forward over a level's rows, each seeing the committed prefix, its ancestors
    and itself (padding rows: their parent row's ancestors, seen by no node). The rows go to
    the cache slots root + offset + i, and attend to all its slots: the mask [w, capacity] is
    built from the root's slot, a device scalar, so a graph of it serves every iteration."""
    dev = lm.device
    w = level.tok.shape[0]
    root, position = scalars[0].long(), scalars[1].long() + depth  # [] each
    anc = torch.cat([above.anc[level.par], _eye(w, dev)], 1)  # [w, S]: tree slots root first
    rel = lm.slot_ids - root  # [capacity] each cache slot's tree slot (< 0: the prefix)
    inside = (rel >= 0) & (rel < anc.shape[1])  # [capacity]
    seen = (rel < 0) | (anc[:, rel.clamp(0, anc.shape[1] - 1)] & inside)  # [w, capacity]
    slots = root + offset + _ranks(w, 1, w, dev)[2]  # [w]
    (top_p, top_t), _ = lm.recorded_call(
        input_ids=level.tok.view(1, w),
        position_ids=position.expand(1, w),
        mask=additive_mask(seen, lm.dtype)[None, None],
        slots=slots,
        top=b,
    )  # [w, B] twice
    return Fed(level, anc, slots, top_p, top_t)


def grow(lm, scalars, top_p, top_t, *, cfg: DynaTreeConfig, d0: int, max_depth: int):
    """Algorithm 1 below the root on the device (see the module docstring), from the root's
    draft forward (top_p, top_t [1, B_max]) and scalars [5] float64 (the root's cache slot and
    position, Phase 3's tau_h and tau_l, the root's token): the tree packed (pack), and its
    ancestor matrix [N_max + 1, N_max + 1]. A function of its tensors and settings only, so
    `engine: graphs` records it, every level's draft forward included, as one CUDA graph per
    (cfg, d0, max_depth); on `engine: compiled` it runs eagerly, each level's forward the
    compiled one (StaticCachedModel.recorded_call)."""
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

    one = torch.ones(1, dtype=torch.bool, device=dev)
    zero = torch.zeros(1, dtype=torch.long, device=dev)
    root_tok = scalars[4:].long()  # [1]
    root = Level(root_tok, torch.zeros(1, dtype=torch.float64, device=dev), one, zero)
    fed = [Fed(root, one.view(1, 1), scalars[:1].long(), top_p, top_t)]
    room = torch.full((), cfg.N_max, device=dev)  # [] drafted nodes the budget still allows
    sizes = widths(cfg, max_depth)
    if lift:  # l. 10: the root u0 is the draft's top-1 token after the prefix
        nxt = Level(top_t[:, 0], top_p[:, 0].double().clamp_min(1e-30).log(), one, zero)
    else:
        nxt = _children(cfg, fed[0], expandable(root, 0), gates, sizes[0], room)
    room = room - nxt.valid.sum()
    offset = 1  # the next free cache slot after the root's
    for level, width in enumerate(sizes[1:], start=1):  # level `level` may hold expandable nodes
        fed.append(_feed(lm, nxt, fed[-1], scalars, offset, level, cfg.B_max))
        offset += nxt.tok.shape[0]
        nxt = _children(cfg, fed[-1], expandable(nxt, level - lift), gates, width, room)
        room = room - nxt.valid.sum()
    packed, n = pack(fed, nxt, cfg.N_max)  # [4, N_max + 1], []
    return packed, n, ancestor_matrix(packed[1], check=False, height=len(fed))


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
    the nodes: token 0, children of the root, slot -1): [4, N_max + 1] its tokens, parents,
    depths and draft slots, and its node count [], on the device. The levels are concatenated,
    their nodes first within each level, so a node's packed row is the number of nodes before
    it: one cumulative sum and one scatter for the whole tree."""
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
    return packed[:, :size], order[-1]


def dynatree_step(target, draft: DraftModel, cfg: DynaTreeConfig, committed: list[int], state):
    """One iteration (see the module docstring); returns engine.decode.Step."""
    from engine.decode import forward_counters, host_counts, make_step

    lm = draft.lm
    before = forward_counters(target, lm)
    t0 = time.perf_counter()
    d0, tau_h, tau_l = adapted(cfg, state)  # Phase 3 from the history: Python values
    lift = 1 if cfg.variant == "paper" else 0
    max_depth = min(cfg.D_max if cfg.dynamic_depth else d0, state.remaining - lift)
    # the root, fed with the committed tokens the draft has not seen yet (causal)
    if lm.length > lm.committed:
        lm.commit([])
    positions = torch.arange(lm.committed, len(committed), device=lm.device)  # [n_p + 1]
    pending = to_device(committed[lm.committed :], lm.device)  # [n_p + 1], the root last
    top_p, top_t = lm.forward(pending, positions, keep=1, top=cfg.B_max)  # [1, B_max] twice
    lm.committed = root_slot = len(committed) - 1
    sizes = widths(cfg, max_depth)
    fed_rows = sum(sizes[:-1])  # the levels' draft forwards write these slots
    lm.reserve(root_slot + 1 + fed_rows)
    scalars = [root_slot, state.prefix_len, tau_h, tau_l, committed[-1]]  # exact in float64
    scalars = to_device(scalars, lm.device, torch.float64)
    sync(lm.device)
    s0 = time.perf_counter()
    run = functools.partial(grow, lm)
    if lm.engine == "graphs":  # recorded whole, the levels' forwards included
        run = lm.graphed("dynatree", run)
    packed, n, tree_anc = run(
        scalars=scalars, top_p=top_p, top_t=top_t, cfg=cfg, d0=d0, max_depth=max_depth
    )
    if lm.on_cuda:  # a graph's outputs live in memory its next replay overwrites: the Tree keeps
        packed = packed.clone()
    sync(lm.device)
    t1 = time.perf_counter()
    lm.recorded(fed_rows, len(sizes) - 1, t1 - s0)  # the levels' forwards and the work between
    tokens, parents, depth, slots = packed  # [N_max + 1] each
    visible = torch.cat(
        [
            torch.ones(tokens.shape[0], state.prefix_len, dtype=torch.bool, device=tokens.device),
            tree_anc,
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
