"""The EAGLE head as a generation's draft (SALF & TALF paper Sec. 2.2; EAGLE, Li et al. 2024):
the `Feed` every TreeBuilder grows its tree with, as DraftModel's for a draft LM, so that every
tree method (EAGLE-2's beam, SpecExec's optimal tree, SALF, DynaTree, linear, ...) drafts with
the head unchanged.

Feature flow. Committed tokens c_0 .. c_{P-1} (the root c_{P-1} last); the head's row of c_j
(j >= 1) pairs it with f_{j-1}, the target's feature of the token before it, at head position
j - 1 (EAGLE's x_{2:s} with f_{1:s-1}):

- the target's features come from its forwards, which run anyway (engine/runtime/eager.py
  `hidden_layers`: its final hidden states): the prefill's (c_0 .. c_{P-2}), then after each
  iteration the root's and the accepted nodes' rows of the verification forward (`commit`);
- a tree node's row pairs its token with its parent's output feature f(d) from the head's
  forward of the parent (fed back, as in drafting), the root's with the target's f_{P-2};
- the head's KV cache keeps the committed rows and, after verification, the root's row (its
  input was the target's feature). The accepted nodes' rows were computed from the head's own
  features, so they are dropped and fed again next iteration with the target's features,
  together with the new root (EAGLE re-runs the accepted tokens the same way).

A node fed in the same `expand` as its parent waits for the parent's output feature: such a
batch runs as several forwards, parents first. A one-token prompt has no feature for its root
c_0 (EAGLE's sequence starts at c_1): the first tree is drafted from a zero feature and its
root row is not kept.
"""

from __future__ import annotations

import numpy as np
import torch

from engine.config import ConfigError
from engine.draft.builder import Batch, TreeBuilder
from engine.draft.model import chunk_visibility
from engine.runtime.eagle_head import FAMILIES, CachedHead, EagleHead
from engine.sampling import Warp, top_token, warp
from engine.transfer import to_device


class EagleDraft:
    """The head, its cache, the target features it has not fed yet, and the tree being built."""

    keep_prev = False  # the NDE taps' option of a draft LM (engine/draft/model.py): never here

    def __init__(self, head: EagleHead, target, w: Warp) -> None:
        """target: the generation's target CachedModel (its features are read from it)."""
        tc = target.model.config
        if getattr(tc, "model_type", None) not in FAMILIES:  # a Llama-style layer's features
            raise ConfigError(
                f"an EAGLE head drafts for a {' or '.join(FAMILIES)} target; this target is "
                f"{getattr(tc, 'model_type', 'unknown')}"
            )
        if (head.cfg.hidden_size, head.cfg.vocab_size) != (tc.hidden_size, tc.vocab_size):
            raise ConfigError(
                f"the EAGLE head (hidden {head.cfg.hidden_size}, vocabulary "
                f"{head.cfg.vocab_size}) is not for this target (hidden {tc.hidden_size}, "
                f"vocabulary {tc.vocab_size})"
            )
        self.lm = CachedHead(head, target.model)
        self.target = target
        # the target's final hidden states (hidden_states[-1]: after the final norm)
        target.hidden_layers = (target.model.config.num_hidden_layers,)
        self.warp = w
        self.rows = 0  # committed tokens c_1 .. c_rows have rows in the head's cache
        self.features: torch.Tensor | None = None  # [k, H] target features f_rows .. not fed
        self.pending: list[int] = []  # committed tokens (after c_rows, before the root)
        self.prefix_len = 0  # committed tokens before the root
        self.path_slots: dict[int, list[int]] = {}  # fed node -> cache slots of root..node
        self.out: dict[int, torch.Tensor] = {}  # fed node -> its output feature [H]
        self.builder: TreeBuilder | None = None

    def prefill(self, target) -> None:
        """After the target's prefill over the prompt, the root excepted: its features."""
        if target.hidden is not None:
            self._add(target.hidden)

    def _add(self, feats: torch.Tensor) -> None:
        feats = feats.to(self.lm.device, self.lm.dtype)  # [n, H]
        self.features = feats if self.features is None else torch.cat([self.features, feats])

    def start(self, committed: list[int], keep_q: bool = True) -> TreeBuilder:
        """Begin a tree rooted at committed[-1]; drops the previous iteration's nodes."""
        if self.lm.length > self.lm.committed:
            self.lm.commit([])
        self.prefix_len = len(committed) - 1
        self.pending = committed[self.rows + 1 : -1]
        have = 0 if self.features is None else self.features.shape[0]
        if self.prefix_len and have != self.prefix_len - self.rows:
            raise RuntimeError(
                f"EAGLE head: {have} target features for {self.prefix_len - self.rows} rows"
            )
        self.path_slots, self.out = {}, {}
        self.builder = TreeBuilder(self.feed, committed[-1], self.lm.device, keep_q)
        return self.builder

    def feed(self, b: TreeBuilder, new: list[int], top: int = 0) -> Batch:
        """The Feed: the head over the pending committed rows (the first time only) and the
        nodes `new`, each seeing the committed rows and its ancestors (ancestor-only mask,
        head position prefix_len - 1 + depth); a node whose parent is in `new` too runs in a
        later forward than its parent (it needs the parent's output feature). `top` is
        ignored (the rows' probabilities are returned)."""
        logits: dict[int, torch.Tensor] = {}
        waiting = list(new)
        while waiting:
            inside = set(waiting)
            ready = [i for i in waiting if b.parents[i] not in inside]
            waiting = [i for i in waiting if b.parents[i] in inside]
            rows = self._forward(b, ready)  # [len(ready), V]
            logits.update(zip(ready, rows))
        stacked = torch.stack([logits[i] for i in new])  # [len(new), V]
        if self.warp.greedy:
            return Batch(list(new), torch.softmax(stacked, -1), None, top_token(stacked))
        q = warp(stacked, self.warp)  # [len(new), V]
        return Batch(list(new), q, q, None)

    def _forward(self, b: TreeBuilder, new: list[int]) -> torch.Tensor:
        """One head forward over the pending rows and the nodes `new` (their parents fed
        already): their logits [len(new), V]; their output features kept in `out`."""
        lm = self.lm
        pend, self.pending = self.pending, []
        n_p, base = len(pend), lm.length
        for j, i in enumerate(new):
            p = b.parents[i]
            self.path_slots[i] = (self.path_slots[p] if p >= 0 else []) + [base + n_p + j]
        visible = chunk_visibility(lm.committed, base, n_p, [self.path_slots[i] for i in new])
        root_pos = max(self.prefix_len - 1, 0)
        positions = [base + j for j in range(n_p)] + [root_pos + b.depth[i] for i in new]
        tokens = pend + [b.tokens[i] for i in new]
        dev = lm.device
        ids = to_device(torch.from_numpy(np.array([tokens, positions], dtype=np.int64)), dev)
        feats = [self._committed_features(n_p)] + [self._input(b, i) for i in new]
        inputs = torch.cat([f.reshape(-1, lm.head.cfg.hidden_size) for f in feats])  # [n, H]
        out, logits = lm.forward(
            ids[0], inputs, ids[1], to_device(torch.from_numpy(visible), dev), keep=len(new)
        )  # [n, H], [len(new), V]
        lm.committed += n_p
        self.out.update((i, out[n_p + j]) for j, i in enumerate(new))
        return logits

    def _committed_features(self, n_p: int) -> torch.Tensor:
        """The features paired with the n_p pending committed rows [n_p, H]."""
        if not n_p:
            return self._zeros(0)
        return self.features[:n_p]

    def _input(self, b: TreeBuilder, node: int) -> torch.Tensor:
        """The feature paired with a node's token [H]: the parent's output feature, for the
        root the target's feature of the token before it (zero for a one-token prompt)."""
        if node > 0:
            return self.out[b.parents[node]]
        if self.prefix_len == 0:
            return self._zeros(1)[0]
        return self.features[self.prefix_len - 1 - self.rows]

    def _zeros(self, n: int) -> torch.Tensor:
        return torch.zeros(
            n, self.lm.head.cfg.hidden_size, device=self.lm.device, dtype=self.lm.dtype
        )

    def commit(self, path: list[int]) -> None:
        """After verification (path: tree nodes below the root, numbered as in the builder's
        last tree()): keep the root's row, drop the nodes' rows, and take the target's
        features of the root and the accepted nodes from its verification forward."""
        if 0 in self.path_slots and self.prefix_len > 0:  # the root's row: the target's feature
            self.lm.commit([self.path_slots[0][-1]])
            self.features = self.features[self.prefix_len - self.rows :]
            self.rows = self.prefix_len
        else:  # nothing fed (or a one-token prompt's root): fed again next time
            self.lm.commit([])
        hidden = self.target.hidden  # [N, H] the verification forward's rows, tree numbering
        self._add(hidden[to_device([0] + list(path), hidden.device)])
        self.path_slots, self.out = {}, {}
