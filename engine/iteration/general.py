"""The general iteration: the reference every other path (engine/iteration/) is tested against.

    tree   = build(draft, state, cfg)      the method's host builder through TreeBuilder
    logits = target(tree)                  one forward, ancestor-only mask, positions prefix + depth
    accept = verify(tree, warp(logits))    the method's verifier: accepted path + correction/bonus

It runs every method, verifier, temperature and engine. On the fast path the greedy verifier
follows the target's argmax (the one-hot warp's, and the one the acceptance counts need
anyway), computed inside the target's forward, and the tree carries no q, which the greedy
verifier never reads: no [N, V] tensor leaves the forward (`argmax_only`).
"""

from __future__ import annotations

from engine.draft import DecodeState
from engine.drafters import DRAFTERS
from engine.iteration.step import (
    Step,
    acceptance_counts,
    forward_counters,
    host_counts,
    make_step,
)
from engine.methods import Method
from engine.runtime.eager import CachedModel
from engine.sampling import top_token, warp
from engine.verify import VERIFIERS, greedy


def applies(target: CachedModel, draft, method: Method, state: DecodeState) -> bool:
    """Always: the general iteration runs every method."""
    return True


def run(target, draft, method: Method, committed: list[int], state: DecodeState, gen, how) -> Step:
    """Draft a tree rooted at committed[-1], run the target over it with the ancestor-only mask,
    verify (the loop commits the caches: it alone knows whether decoding goes on)."""
    clock = target.clock
    argmax_only = target.fast and method.verifier == "greedy"
    before = forward_counters(target, draft.lm)
    t0 = clock.stamp()
    start = draft.start(committed, not argmax_only)
    tree = DRAFTERS[method.name].build(start, state, method.cfg, gen)
    t1 = clock.stamp()
    out = target.forward(
        tree.tokens,
        tree.position_ids(state.prefix_len)[0],
        tree.visibility(state.prefix_len),
        tree.parents,
        argmax=argmax_only,
    )  # [N, V] logits, or their argmax [N] (argmax_only)
    t2 = clock.stamp()
    if argmax_only:  # the greedy verifier needs only the argmax, computed inside the forward
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
