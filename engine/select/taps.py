"""Where the NDE selector's root features come from during decoding (delayed-tree paper,
Appendix E): hooks on both models' output embeddings read the final hidden states and logits
of the forwards the decoding runs anyway.

- target, preceding token: the row of the last accepted node in the previous iteration's
  verification forward (or the prefill's last row), kept by the decode loop
  (`RootTaps.keep_target_row`); footnote 4: the target has no row at the root yet.
- draft, preceding token and root: the first draft forward of the iteration. The draft model
  runs with `DraftModel.keep_prev` (engine/draft.py): the last committed token before the root
  is always re-fed as a pending token and its logits row kept, the "extra draft forward pass"
  of footnote 4 folded into the first forward as one more token.
"""

from __future__ import annotations

import torch
from torch import nn

from engine.draft import DecodeState
from engine.select.nde import Latency, RootFeatures, Trained, root_features


class Tap:
    """The final hidden states [n, H] and logits [n, V] of a model's last forward, read by a
    hook on its output embedding (rows as the forward returned them: with `logits_to_keep`
    the model slices the hidden states before the LM head)."""

    def __init__(self, model: nn.Module) -> None:
        self.hidden: torch.Tensor | None = None
        self.logits: torch.Tensor | None = None
        self._handle = model.get_output_embeddings().register_forward_hook(self._hook)

    def _hook(self, module, inputs, output) -> None:
        self.hidden = inputs[0][0].detach()  # [n, H]
        self.logits = output[0].detach()  # [n, V]

    def close(self) -> None:
        self._handle.remove()


class RootTaps:
    """Taps on the target and the draft, and the target's row at the preceding token."""

    def __init__(self, target: nn.Module, draft: nn.Module, trained: Trained | None = None) -> None:
        self.target, self.draft = Tap(target), Tap(draft)
        self.h_target = target.config.hidden_size
        self.trained = trained  # the selector, when decoding with selector: nde
        self.prev: tuple[torch.Tensor, torch.Tensor] | None = None  # ([V] logits, [Hp] hidden)

    def keep_target_row(self, row: int) -> None:
        """Keep row `row` of the target's last forward: the preceding token of the next root."""
        self.prev = (self.target.logits[row], self.target.hidden[row])

    def features(self, state: DecodeState, latency: Latency) -> RootFeatures:
        """The root's features, read right after the iteration's first draft forward (the one
        expanding the root): its rows are [preceding token, root], or [root] when there was
        no committed token to re-feed (a one-token prompt)."""
        logits, hidden = self.draft.logits, self.draft.hidden  # [1 or 2, V], [1 or 2, Hq]
        q_prev, h_q_prev = logits[0], hidden[0]
        q_root, h_q_root = logits[-1], hidden[-1]
        if self.prev is not None:
            p_prev, h_p_prev = self.prev
        else:  # no target row before the root: no divergence to report, zero hidden state
            p_prev, h_p_prev = q_prev, torch.zeros(self.h_target)
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

    def close(self) -> None:
        self.target.close()
        self.draft.close()
