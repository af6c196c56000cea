"""The decoding loop: prefill, draft a tree, one target forward over it, verify, commit.

    committed = prompt                       target cache holds committed[:-1]
    loop:                                    generate(): timing, truncation, EOS, stats
        tree   = build(draft, state, cfg)    decode_step(): node 0 = committed[-1] (the root)
        logits = target(tree)                  ancestor-only mask, positions prefix + depth
        accept = verify(tree, warp(logits))    accepted path + correction/bonus token
        committed += path tokens + token     target/draft caches keep the accepted path

`decode_step` is one iteration (the seam a faster path replaces, as gpt-fast's
`speculative_decode` beside its `generate`); `generate` owns everything across iterations.
Exactly `max_new_tokens` tokens are emitted (the last iteration's output is truncated) unless
EOS comes first; EOS is emitted and ends the generation.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from engine import (
    ar_step,
    beam_step,
    chain_step,
    ddtree_step,
    dynatree_step,
    fixed_tree_step,
    sequoia_step,
    specinfer_step,
    static_tree,
)
from engine.cache import CachedModel
from engine.clock import Clock
from engine.config import ConfigError, split_engine
from engine.draft import DecodeState, DraftModel
from engine.drafters import DRAFTERS
from engine.drafters.ddtree import block_checkpoint
from engine.methods import Method, resolve_method
from engine.metrics import GenerationStats, IterationStats, peak_memory, reset_peak_memory
from engine.models import Pair
from engine.no_draft import no_draft
from engine.sampling import Warp, draft_warp, top_token, warp
from engine.static_cache import MIN_CAPACITY, cached_model
from engine.transfer import to_device
from engine.tree import Tree
from engine.verify import VERIFIERS, Accept, greedy


@dataclass(frozen=True)
class Generation:
    tokens: list[int]  # the new tokens only
    stats: GenerationStats


@dataclass(frozen=True)
class Step:
    """One iteration: the tree, the verifier's answer, the tokens it yields, and its timings
    as stamps on the generation's clock (engine/clock.py), resolved when the generation ends."""

    tree: Tree
    accept: Accept
    new: list[int]  # accepted path tokens + the correction/bonus token (before truncation)
    # stamps: start, tree built (draft forwards included), target forward done, verified
    stamps: tuple[int, int, int, int]
    draft_spans: list[tuple[int, int]]  # (start, end) stamps of the draft forwards in it
    target_spans: list[tuple[int, int]]  # and of the target's
    draft_forwards: int  # draft-model forwards while building the tree
    draft_tokens: int  # tokens fed in them
    # [2] long, on the device (read once per generation, not per iteration): drafted nodes
    # whose token is the target's top token after their parent (DynaTree Sec. 4.2), and 1 if
    # the last node the verifier reached has drafted children (for the depth-wise acceptance
    # of the delayed-tree paper, Sec. 5; engine/metrics.py acceptance_definitions); or the
    # pair as host ints, where the iteration knew them without a read (engine/chain_step.py)
    counts: torch.Tensor | tuple[int, int] | None = None


# builders with a static-shape greedy iteration on the padded engines (engine/static_tree.py):
# each module's plan(cfg, state) and grow(lm, scalars, top_p, top_t, **settings)
STATIC_TREES = {
    "dynatree": dynatree_step,
    "fixed_tree": fixed_tree_step,
    "specinfer": specinfer_step,
    "beam": beam_step,
    "sequoia": sequoia_step,
    "ddtree": ddtree_step,
}


def forward_counters(target: CachedModel, lm: CachedModel) -> tuple[int, int, int, int]:
    """The draft's and the target's forwards timed so far, and the draft's forward calls and
    tokens, at the start of an iteration (make_step takes the differences)."""
    return len(lm.spans), len(target.spans), lm.forward_calls, lm.forward_tokens


def make_step(
    target: CachedModel,
    lm: CachedModel,
    before: tuple[int, int, int, int],
    stamps: tuple[int, int, int, int],
    tree: Tree,
    accept: Accept,
    new: list[int],
    counts: torch.Tensor | tuple[int, int],
) -> Step:
    """A Step from an iteration's stamps on target.clock (start, tree built, target forward
    done, verified) and its forward counters at the start (forward_counters); every iteration
    path (decode_step, engine/chain_step.py, engine/static_tree.py) ends here. generate()
    gives both models one clock, so every stamp and span indexes the same list."""
    draft0, target0, calls0, tokens0 = before
    return Step(
        tree=tree,
        accept=accept,
        new=new,
        stamps=stamps,
        draft_spans=lm.spans[draft0:],
        target_spans=target.spans[target0:],
        draft_forwards=lm.forward_calls - calls0,
        draft_tokens=lm.forward_tokens - tokens0,
        counts=counts,
    )


def decode_step(
    target: CachedModel,
    draft: DraftModel,
    method: Method,
    committed: list[int],
    state: DecodeState,
    gen: torch.Generator,
) -> Step:
    """Draft a tree rooted at committed[-1], run the target over it with the ancestor-only mask,
    verify (the loop commits the caches: it alone knows whether decoding goes on).

    On the fast path the greedy verifier follows the target's argmax (the one-hot warp's, and
    the one the acceptance counts need anyway), computed inside the target's forward, and the
    tree carries no q, which it never reads: no [N, V] tensor leaves the forward."""
    if ar_step.applies(target, method, state):  # greedy autoregressive: no tree
        return ar_step.ar_step(target, draft, committed, state)
    if chain_step.applies(target, draft, method, state):  # greedy chains, kept on the device
        k = chain_step.chain_length(method)
        return chain_step.chain_step(target, draft, k, committed, state)
    static = STATIC_TREES.get(method.name)  # greedy trees of static shape, grown on the device
    if static is not None and static_tree.applies(target, draft, method, state):
        plan = static.plan(method.cfg, state)
        if plan is not None and plan.widest <= draft.lm.model.config.vocab_size:
            return static_tree.static_step(
                target, draft, committed, state, static.grow, plan, method.name
            )
    clock = target.clock
    lean = target.fast and method.verifier == "greedy"
    before = forward_counters(target, draft.lm)
    t0 = clock.stamp()
    tree = DRAFTERS[method.name].build(draft.start(committed, not lean), state, method.cfg, gen)
    t1 = clock.stamp()
    out = target.forward(
        tree.tokens,
        tree.position_ids(state.prefix_len)[0],
        tree.visibility(state.prefix_len),
        tree.parents,
        argmax=lean,
    )  # [N, V] logits, or their argmax [N] (lean)
    t2 = clock.stamp()
    if lean:  # the greedy verifier needs only the argmax, computed inside the forward
        best = out  # [N] the target's top token after each node
        accept, best_h, host_tokens, parents_h = greedy.read_and_walk(tree, best)
        new = [host_tokens[i] for i in accept.path] + [accept.token]
        counts = host_counts(best_h, host_tokens, parents_h, accept)
    else:
        best = top_token(out)  # [N] the target's top token after each node, at any warp
        accept = VERIFIERS[method.verifier].verify(tree, warp(out, state.warp), gen)
        new = tree.tokens[accept.path].tolist() + [accept.token]
        counts = acceptance_counts(tree, best, accept)
    t3 = clock.stamp()
    return make_step(target, draft.lm, before, (t0, t1, t2, t3), tree, accept, new, counts)


def stage_times(timed: tuple, at: list[float], spans) -> dict[str, float]:
    """An iteration's IterationStats times from `timed` (its Step's stamps, draft and target
    forward spans, and the stamps after the step and after its bookkeeping), the generation's
    resolved stamps `at` (Clock.seconds) and Clock.spans."""
    stamps, draft_spans, target_spans, t3, t4 = timed
    s0, s1, s2, s3 = (at[i] for i in stamps)
    return {
        "draft_s": s1 - s0,
        "target_s": s2 - s1,
        "verify_s": s3 - s2,
        "bookkeeping_s": at[t4] - at[t3],
        "draft_forward_s": spans(draft_spans),
        "target_forward_s": spans(target_spans),
    }


def read_counts(counts: list) -> list[tuple[int, int]]:
    """Every iteration's Step.counts as host ints: the device ones in one read (one per
    generation), the host pairs as they are."""
    on_device = [c for c in counts if isinstance(c, torch.Tensor)]
    read = iter(torch.stack(on_device).tolist() if on_device else [])
    return [c if isinstance(c, tuple) else next(read) for c in counts]


def acceptance_counts(tree: Tree, best: torch.Tensor, accept: Accept) -> torch.Tensor:
    """[2] long on the tree's device, no host read: drafted nodes whose token is the target's
    top token after their parent (best [N]: argmax of the raw logits, the top token at any
    temperature and top-p), and whether the last node the verifier reached has drafted
    children."""
    parents = tree.parents.to(best.device)
    top_match = (tree.tokens[1:].to(best.device) == best[parents[1:]]).sum()
    last = accept.path[-1] if accept.path else 0
    return torch.stack([top_match, (parents == last).any().long()])


def host_counts(
    best: list[int], tokens: list[int], parents: list[int], accept: Accept
) -> tuple[int, int]:
    """acceptance_counts from a greedy verification's host read (greedy.read_and_walk)."""
    top_match = sum(tokens[i] == best[parents[i]] for i in range(1, len(tokens)))
    last = accept.path[-1] if accept.path else 0
    return top_match, int(last in parents)


def open_features(method: Method, pair: Pair, target: CachedModel, engine: str):
    """The trained block drafter of a `ddtree` method with `drafter: block` (its BlockContext
    on this engine path, engine/train/block_context.py) with the target set to return the
    features it reads, or None (the target returns none). The drafter conditions on the
    target's hidden states of the committed context (DDTree Sec. 3): the prefill's, then each
    iteration's root and accepted nodes' rows of the verification forward, which runs anyway."""
    name = block_checkpoint(method.cfg) if method.name == "ddtree" else None
    target.hidden_layers, target.hidden = (), None
    if name is None:
        return None
    from engine.train.block_context import block_context
    from engine.train.block_drafter import cached_drafter

    model = pair.target.model
    features = block_context(cached_drafter(name, model), model, engine)
    target.hidden_layers = features.layers
    return features


def generate(
    pair: Pair,
    prompt_ids: list[int],
    method: str | Method,
    max_new_tokens: int,
    temperature: float = 0.0,
    top_p: float = 1.0,
    seed: int = 0,
    params: dict | None = None,
    engine: str = "eager",
    draft_temperature: float | None = None,
    draft_top_p: float | None = None,
) -> Generation:
    """Decode until `max_new_tokens` or EOS; timing, truncation, caches and stats live here,
    one iteration is `decode_step`. engine: how the models run (engine/config.py ENGINE_SPECS:
    an engine path, or ENGINE+lean on our own forward of the models, engine/lean_model.py).
    temperature / top_p: the target's sampling, the law of the output; draft_temperature /
    draft_top_p: how the draft draws its trees (None: as the target; DySpec Sec. 5.1 drafts at
    0.6 for targets at 0 and 0.6). A method given resolved must have been resolved with the
    same draft temperature (its verifier's pairing with the trees depends on it)."""
    if isinstance(method, str):
        method = resolve_method(method, params, temperature, draft_temperature)
    if not prompt_ids:
        raise ConfigError("the prompt must contain at least one token")
    if max_new_tokens < 1:
        raise ConfigError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    try:
        w = Warp(temperature, top_p)
        dw = draft_warp(w, draft_temperature, draft_top_p)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    device = pair.target.device
    gen = torch.Generator(device=device).manual_seed(seed)
    eos = pair.target.tokenizer.eos_token_id
    path, _ = split_engine(engine)
    capacity = len(prompt_ids) + max_new_tokens + MIN_CAPACITY
    target = cached_model(pair.target.model, engine, capacity)
    if pair.draft is None:  # a model-free method (prompt lookup): engine/no_draft.py
        draft = no_draft(method.name, device)
    else:
        draft = DraftModel(pair.draft.model, dw, cached_model(pair.draft.model, engine, capacity))
    features = open_features(method, pair, target, path)
    taps = selector_taps(method, target, draft, path)
    try:
        with torch.inference_mode():  # once per generation, not per forward (engine/cache.py)
            return _generate(
                target, draft, method, prompt_ids, max_new_tokens, w, dw, gen, eos, taps, features
            )
    finally:
        if taps is not None:
            taps.close()


def selector_taps(method: Method, target: CachedModel, draft: DraftModel, engine: str):
    """The NDE selector's taps (engine/select/taps.py) for `delayed` with `selector: nde`,
    with the draft set to re-feed the preceding token; None for every other method."""
    if getattr(method.cfg, "selector", "fixed") != "nde":
        return None
    from engine.select.nde import load
    from engine.select.taps import RootTaps

    draft.keep_prev = True
    return RootTaps(target, draft.lm, load(method.cfg.selector_checkpoint), engine)


def _generate(target, draft, method, prompt_ids, max_new_tokens, w, dw, gen, eos, taps, features):
    """generate()'s loop over its loaded caches; taps: the NDE selector's, features: the block
    drafter's target features (open_features), each None when the method does not use it."""
    device = target.device
    reset_peak_memory(device)
    clock = Clock(device)  # both models' forwards and every stage, resolved at the end
    target.use_clock(clock)
    draft.lm.use_clock(clock)
    start = clock.stamp()
    committed = list(prompt_ids)
    target.extend(committed[:-1])
    if features is not None and len(committed) > 1:
        features.extend(target.hidden)  # [P, F] the prompt's features, the root's excepted
    if taps is not None and len(committed) > 1:
        taps.keep_target_row(-1)  # the target after the preceding token (the prompt's)
    prefilled = clock.stamp()
    out: list[int] = []
    iterations: list[IterationStats] = []  # their times and acceptance counts after the loop
    counts: list[torch.Tensor | tuple[int, int]] = []  # per iteration, Step.counts
    timed: list[tuple] = []  # per iteration: its stamps and forward spans (stage_times)
    history: list[int] = []
    history_depth: list[int] = []
    history_size: list[int] = []
    done = False
    while not done:
        state = DecodeState(
            prefix_len=len(committed) - 1,
            root_token=committed[-1],
            warp=w,
            draft_warp=dw,
            remaining=max_new_tokens - len(out),
            history=tuple(history),
            history_depth=tuple(history_depth),
            history_size=tuple(history_size),
            context=committed,  # by reference: read-only for the drafter (engine/draft.py)
            features=features,
            selector=taps,
        )
        step = decode_step(target, draft, method, committed, state, gen)
        t3 = clock.stamp()
        new = step.new[: max_new_tokens - len(out)]
        if eos is not None and eos in new:
            new = new[: new.index(eos) + 1]
        out += new
        committed += new
        done = len(out) >= max_new_tokens or (eos is not None and out[-1] == eos)
        path = step.accept.path
        if not done:  # keep the root and the accepted nodes' cache; the last token is the root
            target.commit([state.prefix_len + i for i in [0] + path])
            draft.commit(path)
            if features is not None:  # the root and the accepted nodes are committed now
                rows = to_device([0] + path, target.hidden.device)
                features.extend(target.hidden[rows])  # [1 + len(path), F]
            if taps is not None:  # the last accepted node precedes the next root
                taps.keep_target_row(path[-1] if path else 0)
        history.append(len(path))
        history_depth.append(step.tree.max_depth())
        history_size.append(step.tree.size - 1)
        counts.append(step.counts)
        timed.append((step.stamps, step.draft_spans, step.target_spans, t3, clock.stamp()))
        iterations.append(
            IterationStats(
                tree_size=step.tree.size,
                accepted=len(path),
                emitted=len(new),
                draft_s=0.0,  # the times once the clock is read, after the loop
                target_s=0.0,
                verify_s=0.0,
                bookkeeping_s=0.0,
                draft_forward_s=0.0,
                target_forward_s=0.0,
                draft_forwards=step.draft_forwards,
                draft_tokens=step.draft_tokens,
            )
        )
    at = clock.seconds()  # the one wait for the timings (engine/clock.py)
    target.use_clock(Clock(device))  # the generation's clock and its first event let go now,
    draft.lm.use_clock(Clock(device))  # not by a garbage collection during a graph capture
    iterations = [
        replace(it, **stage_times(t, at, clock.spans), top_match=top, tried=it.accepted + below)
        for it, t, (top, below) in zip(iterations, timed, read_counts(counts))
    ]
    stats = GenerationStats(
        method=method.name,
        new_tokens=len(out),
        prefill_s=at[prefilled] - at[start],
        ttft_s=at[timed[0][3]] - at[start],
        total_s=at[-1] - at[start],
        peak_memory_bytes=peak_memory(device),
        iterations=tuple(iterations),
    )
    return Generation(tokens=out, stats=stats)
