"""One greedy autoregressive iteration on a fast path: the target's next token, no tree built.

The general iteration (engine/iteration/general.py) runs autoregressive decoding as the
empty draft (engine/drafters/autoregressive.py: a method whose trees are the root alone): a
root-only TreeBuilder frozen into a Tree (three host-to-device copies), its all-visible mask row
built on the host and copied, the greedy verifier's read of the tree. Here the root goes to the
device once and the target's forward over it is causal (the fast path's one-token mask is a view of
a preallocated row); its argmax, computed inside the forward, is the iteration's one host read. The
baseline of every speedup, and what bench/gpu.py holds against the bandwidth floor, so its overhead
per token is what a GPU run sees. Output is token for token the general path's
(tests/engine/runtime/test_fast_path.py, tests/engine/iteration/test_autoregressive_path.py).
"""

from __future__ import annotations

import torch

from engine.draft import DecodeState
from engine.drafters import DRAFTERS
from engine.iteration.step import Step, forward_counters, make_step
from engine.methods import Method
from engine.runtime.eager import CachedModel
from engine.transfer import to_device
from engine.tree import Tree
from engine.verify import Accept


def applies(target: CachedModel, draft, method: Method, state: DecodeState) -> bool:
    """Whether `method`'s iteration runs here: a method whose trees are the root alone (its
    record's sampling is None: autoregressive decoding) with the greedy verifier on a fast
    (static-cache) path."""
    root_only = DRAFTERS[method.name].sampling is None
    return target.fast and root_only and method.verifier == "greedy"


def run(target: CachedModel, draft, method, committed: list[int], state, gen, how) -> Step:
    """One iteration (see the module docstring). The draft is not touched (the loop's
    draft.commit([]) keeps its committed prefix)."""
    device = target.device
    before = forward_counters(target, draft.lm)
    clock = target.clock
    t0 = clock.stamp()
    root = to_device(committed[-1:], device)  # [1]
    position = torch.full((1,), state.prefix_len, dtype=torch.long, device=device)  # [1]
    t1 = clock.stamp()
    best = target.step(root, position, argmax=True)  # [1] the target's next token
    t2 = clock.stamp()
    token = best.tolist()[0]  # the one host read
    zero = torch.zeros(1, dtype=torch.long, device=device)
    tree = Tree(root, zero - 1, zero, sampling="deterministic", height=0)
    counts = (0, 0)  # no drafted node
    t3 = clock.stamp()
    accept = Accept(path=[], token=token)
    return make_step(target, draft.lm, before, (t0, t1, t2, t3), tree, accept, [token], counts)
