"""Where the NDE selector's root features come from during decoding (delayed-tree paper,
Appendix E): the final hidden states and logits of the forwards the decoding runs anyway, which
both cached models return beside their heads while tapped (engine/runtime/eager.py `tap`; on the
padded engines from inside the graph: a replayed CUDA graph runs no module hook).

- target, preceding token: the row of the last accepted node in the previous iteration's
  verification forward (or the prefill's last row), kept by the decode loop
  (`RootTaps.keep_target_row`); footnote 4: the target has no row at the root yet.
- draft, preceding token and root: the first draft forward of the iteration. The draft model
  runs with `DraftModel.keep_prev` (engine/draft/model.py): the last committed token before the root
  is always re-fed as a pending token and its logits row kept, the "extra draft forward pass"
  of footnote 4 folded into the first forward as one more token.

The features stay on the decoding device, and so does a copy of the trained selector
(`choose`): its one host read per iteration is the chosen action, which the host needs to
draft the tree. On the padded engines the selector network is replayed from a CUDA graph
(engine/runtime/cuda_graphs.py), as the models' forwards are.
"""

from __future__ import annotations

import copy
import functools

import torch

from engine.config import PADDED
from engine.draft import DecodeState
from engine.drafters.delayed.selector import (
    Latency,
    RootFeatures,
    Trained,
    best_action,
    load,
    root_features,
)
from engine.runtime.cuda_graphs import GraphedForward, OneOwner
from engine.runtime.eager import CachedModel


class RootTaps:
    """The target's and the draft's cached models, tapped, and the target's row at the
    preceding token."""

    def __init__(
        self,
        target: CachedModel,
        draft: CachedModel,
        trained: Trained | None = None,
        engine: str = "eager",
    ) -> None:
        self.target, self.draft = target, draft
        target.tap = draft.tap = True
        self.h_target = target.model.config.hidden_size
        self.trained = trained  # the selector, when decoding with selector: nde
        self.prev: tuple[torch.Tensor, torch.Tensor] | None = None  # ([V] logits, [Hp] hidden)
        if trained is not None:
            self._pick = device_selector(trained, target.device, engine)

    def choose(self, state: DecodeState) -> tuple[int, int, int]:
        """The trained selector's action (K, L1, L2) at this root (Sec. 6), read right after
        the iteration's first draft forward, as `features`."""
        f = self.features(state, self.trained.latency)
        best = self._pick(
            h_prev_p=f.h_prev_p, h_prev_q=f.h_prev_q, h_cur_q=f.h_cur_q, scalars=f.scalars
        )
        return self.trained.actions[int(best)]  # the host read of the choice

    def keep_target_row(self, row: int) -> None:
        """Keep row `row` of the target's last forward: the preceding token of the next root."""
        logits, hidden = self.target.tapped  # [r, V], [r, Hp]
        self.prev = (logits[row], hidden[row])

    def features(self, state: DecodeState, latency: Latency) -> RootFeatures:
        """The root's features, read right after the iteration's first draft forward (the one
        expanding the root): its rows are [preceding token, root], or [root] when there was
        no committed token to re-feed (a one-token prompt)."""
        logits, hidden = self.draft.tapped  # [1 or 2, V], [1 or 2, Hq]
        q_prev, h_q_prev = logits[0], hidden[0]
        q_root, h_q_root = logits[-1], hidden[-1]
        if self.prev is not None:
            p_prev, h_p_prev = self.prev
        else:  # no target row before the root: no divergence to report, zero hidden state
            p_prev, h_p_prev = q_prev, torch.zeros(self.h_target, device=q_prev.device)
        return root_features(
            p_prev,
            h_p_prev,
            q_prev,
            h_q_prev,
            q_root,
            h_q_root,
            context_length=state.prefix_len + 1,
            temperature=state.warp.temperature,
            top_p=state.warp.top_p,
            latency=latency,
        )

    def prefill(self, target) -> None:
        """engine/drafters/record.py Attached: the target after the preceding token (the
        prompt's)."""
        self.keep_target_row(-1)

    def commit(self, target, path: list[int]) -> None:
        """Attached: the last accepted node precedes the next root."""
        self.keep_target_row(path[-1] if path else 0)

    def close(self) -> None:
        for lm in (self.target, self.draft):
            lm.tap, lm.tapped = False, None


# the current selector's network per decoding device and engine path: its device copy made, and
# its graph captured, once per process, not per generation
_PICKS = OneOwner()


def device_selector(trained: Trained, device: torch.device, engine: str):
    """best_action over a copy of `trained`'s network on `device`, replayed from a CUDA graph
    on the padded engines."""

    def make():
        pick = functools.partial(best_action, copy.deepcopy(trained.net).to(device))
        return GraphedForward(pick, device) if engine in PADDED else pick

    return _PICKS.get(trained, (device, engine), make)


def attach(cfg, pair, target: CachedModel, draft, engine: str) -> RootTaps | None:
    """The delayed tree's learned part for one generation (engine/drafters/record.py
    `attach`): with `selector: nde`, the NDE selector's taps and trained network, with the
    draft set to re-feed the preceding token; None with the fixed action."""
    if cfg.selector != "nde":
        return None
    draft.keep_prev = True
    return RootTaps(target, draft.lm, load(cfg.selector_checkpoint), engine)
