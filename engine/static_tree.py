"""One greedy iteration whose tree grows on the device with static shapes: one host read.

The general iteration (engine/decode.py `decode_step`) grows a tree in Python: each draft
forward's top children come to the host, where the builder picks the next level, so an
iteration reads the device once per level. Here a builder with static level widths (greedy
DynaTree, engine/dynatree_step.py; the fixed tree, engine/fixed_tree_step.py; SpecInfer's
expansion tree, engine/specinfer_step.py; EAGLE-2's beam tree, engine/beam_step.py; Sequoia's,
engine/sequoia_step.py; DDTree's, engine/ddtree_step.py; registered in engine/decode.py
STATIC_TREES, each with `plan(cfg, state)`, this iteration's shapes, and `grow`) grows the same
tree with tensor ops, and the host learns it only with the verification result:

    level 0: the root, fed with the committed tokens the draft has not seen (causal), its
             top children the first level's candidates
    level l: w_l rows (static), of which the first k_l are nodes and the rest padding; each
             level is one draft forward whose rows see the committed prefix, their ancestors
             and themselves, and go to the cache slots after the root's
    target:  one forward over the tree packed into budget + 1 rows in BFS order (padding rows
             are children of the root that no node sees), returning its argmax per row
    read:    the node count, the target's argmaxes, the tree's tokens, parents and draft
             slots, in one `tolist`; the greedy walk (engine/verify/greedy.py) runs on the host

Everything below the root (the builder's `grow`: the levels' draft forwards, the selection
between them and the packing) is a function of device tensors and settings only: the root's
cache slot, position and token and two gates (DynaTree's Phase 3 thresholds) come in as one
float64 tensor, each level's mask over all cache slots is built from the root's slot. On
`engine: graphs` it is recorded whole, draft forwards included, as one CUDA graph per setting
and replayed (StaticCachedModel.graphed): an iteration launches the root's forward, that graph,
the target's forward and a few copies. The draft's forward seconds then count the selection
recorded with its forwards. The tests replay it on the CPU from a make_fx record
(engine/cuda_graphs.py TRACE_ON_CPU), which keeps any host value read at capture as a CUDA
graph does, and check the trees node for node against the Python builders'.

The price of the static shapes is padding: every level up to the depth limit is fed at its
full width, also after the tree stopped growing, and the target verifies budget + 1 rows. So
it runs on `engine: compiled` and `graphs` only, whose forwards are graph replays anyway,
where the saved host reads and launches are what is left to save.
`engine: fast` keeps the Python builders, which feed only the expandable nodes: on the CPU a
forward's cost grows with its rows, and on an H100 with eager forwards (bench/gpu_exact.py,
2026-11-26, tiny pairs, 2 prompts x 32 tokens) `engine: fast` with DynaTree's step took 2.78 s
where `engine: eager` with the Python builder took 0.86 s (llama; neox 2.19 s against 0.66 s):
with launch-bound forwards every fed level costs a full draft forward, and the tiny drafts'
trees stop after one level.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from engine.draft import DecodeState, DraftModel
from engine.transfer import to_device
from engine.tree import Tree, additive_mask, depth_from_parents
from engine.verify import greedy


@dataclass(frozen=True)
class Plan:
    """One iteration's static shapes, made on the host by a builder's `plan(cfg, state)`."""

    top: int  # children asked of the root's draft forward
    sizes: tuple[int, ...]  # rows of each fed level below the root, then of the last level
    widest: int  # most children of one node: the draft's vocabulary must hold them
    settings: dict = field(default_factory=dict)  # grow's keyword settings: a graph per value
    gates: tuple[float, float] = (0.0, 0.0)  # two device scalars for grow (scalars[2:4])


def applies(target, draft, method, state: DecodeState) -> bool:
    """Whether a static builder's iteration can run here: greedy, with a draft model, on a
    padded graph path (static_device)."""
    return (
        target.fast
        and method.verifier == "greedy"
        and state.draft_warp.greedy
        and isinstance(draft, DraftModel)
        and not draft.keep_prev
        and static_device(target)
    )


def static_device(target) -> bool:
    """Whether the static-shape growth pays on this target's path: padded graph forwards (see the
    module docstring)."""
    return target.compiled


@functools.cache
def ranks(w: int, b: int, width: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Constants of a level of w rows with B children each, made once per shape: [B] each
    child's rank, [w * B] each child's parent row, [width] the row numbers of the next level."""
    rows = torch.arange(max(b, w * b, width), device=device)
    return rows[:b], rows[: w * b] // b, rows[:width]


@functools.cache
def _eye(w: int, device: torch.device) -> torch.Tensor:
    """[w, w] bool identity (each row of a level sees itself), made once per width."""
    return torch.eye(w, dtype=torch.bool, device=device)


class Level(NamedTuple):
    """One level of the tree being grown: w rows, the first of which are its nodes."""

    tok: torch.Tensor  # [w] long token of each row (0 on padding)
    lp: torch.Tensor  # [w] float log p(u), the path's cumulative draft log-probability
    valid: torch.Tensor  # [w] bool: the row is a node
    par: torch.Tensor  # [w] long: the parent's row in the level above


class Fed(NamedTuple):
    """A level after its draft forward."""

    level: Level
    anc: torch.Tensor  # [w, S] bool: the tree slots (root first) each row sees, itself included
    slots: torch.Tensor  # [w] long: the draft cache slot of each row
    top_p: torch.Tensor  # [w, B] float32 the draft's top-B probabilities below each row
    top_t: torch.Tensor  # [w, B] long and their tokens


def root(scalars: torch.Tensor, top_p: torch.Tensor, top_t: torch.Tensor) -> Fed:
    """The root as a fed level: its token (scalars[4]) at its cache slot (scalars[0]), path
    log-probability 0, and its forward's top children (top_p, top_t [1, B])."""
    dev = top_p.device
    one = torch.ones(1, 1, dtype=torch.bool, device=dev)
    zero = torch.zeros(1, dtype=torch.long, device=dev)
    level = Level(scalars[4:].long(), torch.zeros(1, dtype=torch.float64, device=dev), one[0], zero)
    return Fed(level, one, scalars[:1].long(), top_p, top_t)


def feed(lm, level: Level, above: Fed, scalars, offset: int, depth: int, b: int) -> Fed:
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
    slots = root + offset + ranks(w, 1, w, dev)[2]  # [w]
    (top_p, top_t), _ = lm.recorded_call(
        input_ids=level.tok.view(1, w),
        position_ids=position.expand(1, w),
        mask=additive_mask(seen, lm.dtype)[None, None],
        slots=slots,
        top=b,
    )  # [w, B] twice
    return Fed(level, anc, slots, top_p, top_t)


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
    """pack_levels of the fed levels (their draft slots) and the last, unfed one."""
    slots = [f.slots for f in fed] + [torch.full_like(last.par, -1)]
    return pack_levels([f.level for f in fed] + [last], slots, n_max)


def pack_levels(levels: list[Level], slots: list[torch.Tensor], n_max: int):
    """The tree in BFS order, packed into N_max + 1 rows (node 0 the root, padding rows after
    the nodes: token 0, children of the root, slot -1): [4, N_max + 1] its tokens, parents,
    depths and draft slots, and its node count [], on the device. levels: one per depth, the
    root's first, each row's `par` a row of the level above; slots: per level [w] each row's
    draft cache slot (-1: never fed). The levels are concatenated, so a node's packed row is
    the number of nodes before it: one cumulative sum and one scatter for the whole tree."""
    dev, size = levels[0].tok.device, n_max + 1
    widths = tuple(lv.tok.shape[0] for lv in levels)
    depth, above, first, blank = _layout(widths, size, dev)  # [R] each, [4, size + 1]
    valid = torch.cat([lv.valid for lv in levels])  # [R]
    order = valid.cumsum(0)  # [R] 1 + each node's packed row
    parents = order[torch.cat([lv.par for lv in levels]) + above] - first  # [R]
    rows = torch.stack([torch.cat([lv.tok for lv in levels]), parents, depth, torch.cat(slots)])
    packed = blank.clone()  # [4, size + 1]
    dest = torch.where(valid, order - 1, size)  # [R]; size: the dump column
    packed.scatter_(1, dest.expand(4, -1), rows)
    return packed[:, :size], order[-1]


def static_step(
    target,
    draft: DraftModel,
    committed: list[int],
    state: DecodeState,
    grow: Callable,
    plan: Plan,
    name: str,
):
    """One iteration (see the module docstring): `grow(lm, scalars, top_p, top_t,
    **plan.settings)` -> (packed [4, budget + 1], node count [], ancestor matrix) grows the
    tree below the root from the root's forward (its `plan.top` children), writing levels of
    `plan.sizes` rows (all but the last fed) to the draft cache; graphed on `engine: graphs`
    as `name`. Returns engine.decode.Step."""
    from engine.decode import forward_counters, host_counts, make_step

    lm = draft.lm
    before = forward_counters(target, lm)
    clock = target.clock
    t0 = clock.stamp()
    # the root, fed with the committed tokens the draft has not seen yet (causal)
    if lm.length > lm.committed:
        lm.commit([])
    positions = torch.arange(lm.committed, len(committed), device=lm.device)  # [n_p + 1]
    pending = to_device(committed[lm.committed :], lm.device)  # [n_p + 1], the root last
    top_p, top_t = lm.forward(pending, positions, keep=1, top=plan.top)  # [1, top] twice
    lm.committed = root_slot = len(committed) - 1
    fed_rows = sum(plan.sizes[:-1])  # the levels' draft forwards write these slots
    lm.reserve(root_slot + 1 + fed_rows)
    scalars = [root_slot, state.prefix_len, *plan.gates, committed[-1]]  # exact in float64
    scalars = to_device(scalars, lm.device, torch.float64)
    s0 = clock.stamp()
    run = functools.partial(grow, lm)
    if lm.engine == "graphs":  # recorded whole, the levels' forwards included
        run = lm.graphed(name, run)
    packed, n, tree_anc = run(scalars=scalars, top_p=top_p, top_t=top_t, **plan.settings)
    if lm.on_cuda:  # a graph's outputs live in memory its next replay overwrites: the Tree keeps
        packed = packed.clone()
    t1 = clock.stamp()
    lm.recorded(fed_rows, len(plan.sizes) - 1, (s0, t1))  # the levels' forwards, work between
    tokens, parents, depth, slots = packed  # [budget + 1] each
    visible = torch.cat(
        [
            torch.ones(tokens.shape[0], state.prefix_len, dtype=torch.bool, device=tokens.device),
            tree_anc,
        ],
        1,
    )  # [budget + 1, prefix_len + budget + 1]
    best = target.forward(tokens, state.prefix_len + depth, visible, parents, argmax=True)
    t2 = clock.stamp()
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
        sampling="deterministic",  # greedy top-k children
        height=max(depth_from_parents(par_h)),
    )
    counts = host_counts(best_h, tok_h, par_h, accept)
    t3 = clock.stamp()
    new = [tok_h[i] for i in accept.path] + [accept.token]
    return make_step(target, lm, before, (t0, t1, t2, t3), tree, accept, new, counts)
