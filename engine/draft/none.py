"""The draft side of a model-free method (prompt lookup, autoregressive): no draft model is
loaded or run. `generate` uses `NoDraft` in place of `DraftModel` when the pair has no draft
(`load_pair(target, None)`, a trial with `draft: none`); a tree builder that calls `expand`
gets a clear error instead of a forward.
"""

from __future__ import annotations

import torch

from engine.draft.builder import Batch, TreeBuilder


class _NoLM:
    """The counters an iteration reads from a draft LM: always zero, no forward timed."""

    spans: tuple = ()
    forward_calls = 0
    forward_tokens = 0

    def use_clock(self, clock) -> None:
        pass


def _no_feed(builder: TreeBuilder, new: list[int]) -> Batch:
    raise ValueError(
        "this method runs the draft model, but the pair has no draft (draft: none); "
        "only model-free methods (engine.drafters.MODEL_FREE) run without one"
    )


class NoDraft:
    """DraftModel's interface (start, commit, lm counters) without a model."""

    def __init__(self, device: torch.device | None = None) -> None:
        self.lm = _NoLM()
        self.device = device
        self.builder: TreeBuilder | None = None

    def start(self, committed: list[int], keep_q: bool = True) -> TreeBuilder:
        self.builder = TreeBuilder(_no_feed, committed[-1], self.device, keep_q)
        return self.builder

    def commit(self, path: list[int]) -> None:
        pass
