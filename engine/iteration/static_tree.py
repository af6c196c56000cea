"""One greedy iteration whose tree grows on the device with static shapes: one host read.

The general iteration (engine/iteration/general.py) grows a tree in Python: each draft
forward's top children come to the host, where the builder picks the next level, so an
iteration reads the device once per level. Here a method with a device plan (its record's
`plan` and `grow`, engine/drafters/<name>/plan.py: greedy DynaTree, the fixed tree, SpecInfer's
expansion tree, EAGLE-2's beam tree, Sequoia's, DDTree's; `plan(cfg, state)` gives this
iteration's shapes, engine/draft/growth.py has the parts `grow` uses) grows the same tree with
tensor ops, and the host learns it only with the verification result:

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
(engine/runtime/cuda_graphs.py TRACE_ON_CPU), which keeps any host value read at capture as a CUDA
graph does, and check the trees node for node against the Python builders'.

The price of the static shapes is padding: every level up to the depth limit is fed at its
full width, also after the tree stopped growing, and the target verifies budget + 1 rows. So
it runs on `engine: compiled` and `graphs` only, whose forwards are graph replays anyway,
where the saved host reads and launches are what is left to save.
`engine: fast` keeps the Python builders, which feed only the expandable nodes: on the CPU a
forward's cost grows with its rows, and on a GPU with eager forwards every fed level costs a
full draft forward (measured on an H100 with the tiny pairs: docs/gpu.md).
"""

from __future__ import annotations

import functools

import torch

from engine.draft import DecodeState, DraftModel
from engine.draft.growth import Plan
from engine.drafters import DRAFTERS
from engine.iteration.step import forward_counters, host_counts, make_step
from engine.methods import Method
from engine.transfer import to_device
from engine.tree import Tree, depth_from_parents
from engine.verify import greedy


def applies(target, draft, method: Method, state: DecodeState) -> Plan | None:
    """This iteration's Plan where a device plan can run here, else None: the method has one
    (its record's `plan`) and it gives shapes for this state whose widest node the draft's
    vocabulary holds; greedy, with a draft model, on a padded graph path (static_device)."""
    record = DRAFTERS[method.name]
    if not (
        record.plan is not None
        and target.fast
        and method.verifier == "greedy"
        and state.draft_warp.greedy
        and isinstance(draft, DraftModel)
        and not draft.keep_prev
        and static_device(target)
    ):
        return None
    plan = record.plan(method.cfg, state)
    if plan is None or plan.widest > draft.lm.model.config.vocab_size:
        return None
    return plan


def static_device(target) -> bool:
    """Whether the static-shape growth pays on this target's path: padded graph forwards (see the
    module docstring)."""
    return target.padded


def run(target, draft: DraftModel, method: Method, committed: list[int], state, gen, plan: Plan):
    """One iteration (see the module docstring): the record's `grow(lm, scalars, top_p, top_t,
    **plan.settings)` -> (packed [4, budget + 1], node count [], ancestor matrix) grows the
    tree below the root from the root's forward (its `plan.top` children), writing levels of
    `plan.sizes` rows (all but the last fed) to the draft cache; graphed on `engine: graphs`
    as the method's name."""
    record = DRAFTERS[method.name]
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
    grown = functools.partial(record.grow, lm)
    if lm.engine == "graphs":  # recorded whole, the levels' forwards included
        grown = lm.graphed(method.name, grown)
    packed, n, tree_anc = grown(scalars=scalars, top_p=top_p, top_t=top_t, **plan.settings)
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
