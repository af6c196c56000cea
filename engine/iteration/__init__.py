"""One decoding iteration, on the first path that applies (`iterate`): draft a tree rooted at the
last committed token, run the target over it, verify; the decoding loop (engine/decode.py)
commits the caches. Each path is a module with `applies(target, draft, method, state)`, which
returns what the path needs to know (truthy) or nothing, and `run(target, draft, method,
committed, state, gen, how)` -> Step (step.py):

    autoregressive.py   greedy root-only trees on a fast path: the target's next token, one read
    chain.py            greedy chains of fixed length on a fast path, kept on the device
    static_tree.py      greedy trees of methods with a device plan, on padded graph paths
    general.py          everything: the method's host builder and verifier (the reference)

Every path's output is token for token the general path's (tests/engine/iteration/).
"""

from __future__ import annotations

import torch

from engine.draft import DecodeState
from engine.iteration import autoregressive, chain, general, static_tree
from engine.iteration.step import Step
from engine.methods import Method

PATHS = (autoregressive, chain, static_tree, general)  # tried in order; general always applies


def iterate(
    target, draft, method: Method, committed: list[int], state: DecodeState, gen: torch.Generator
) -> Step:
    """One iteration on the first path of PATHS that applies here."""
    for path in PATHS:
        how = path.applies(target, draft, method, state)
        if how:
            return path.run(target, draft, method, committed, state, gen, how)
    raise AssertionError("the general iteration always applies")
