"""Growing a draft tree on the device with static shapes: the parts every method's device plan
(engine/drafters/<name>/plan.py) grows its tree with, and the iteration that runs them
(engine/iteration/static_tree.py) reads.

A method with a device plan describes one iteration's shapes on the host (`Plan`, from its
`plan(cfg, state)`) and grows the tree below the root with tensor ops only (its `grow(lm,
scalars, top_p, top_t, **settings)`): the root as a fed level (`root`), each further level one
draft forward over its rows (`feed`: every row sees the committed prefix, its ancestors and
itself), and the levels packed into the tree in BFS order (`pack`, `pack_levels`). A level is w
rows (static), the first k of which are nodes and the rest padding (`Level`, `Fed`).
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from engine.transfer import to_device
from engine.tree import additive_mask


@dataclass(frozen=True)
class Plan:
    """One iteration's static shapes, made on the host by a builder's `plan(cfg, state)`."""

    top: int  # children asked of the root's draft forward
    sizes: tuple[int, ...]  # rows of each fed level below the root, then of the last level
    widest: int  # most children of one node: the draft's vocabulary must hold them
    settings: dict = field(default_factory=dict)  # grow's keyword settings: a graph per value
    gates: tuple[float, float] = (0.0, 0.0)  # two device scalars for grow (scalars[2:4])


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
