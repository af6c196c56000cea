"""The draft model of a generation: its LM with a KV cache (engine/runtime), the `Feed` that runs
it for a `TreeBuilder` (engine/draft/builder.py), and where each node of the tree being built
sits in the cache, so that the accepted path's cache is kept after verification."""

from __future__ import annotations

import itertools

import numpy as np
import torch

from engine.draft.builder import Batch, TreeBuilder
from engine.runtime.eager import CachedModel
from engine.sampling import Warp, top_token, warp
from engine.transfer import read_pair, to_device


def chunk_visibility(committed: int, base: int, n_p: int, paths: list[list[int]]) -> np.ndarray:
    """The ancestor-only mask of one draft chunk [n_p + len(paths), base + n_p + len(paths)]
    bool: n_p pending committed tokens at slots base.. (causal among themselves, seen by every
    node) then one tree node per path (its ancestors' cache slots and its own); every row sees
    the first `committed` slots. Built in numpy: a few small ops cost several times less there
    than as CPU tensor ops, and it goes to the device in one copy."""
    n = n_p + len(paths)
    visible = np.zeros((n, base + n), dtype=bool)
    visible[:, :committed] = True
    if n_p:
        visible[:n_p, base : base + n_p] = np.tri(n_p, dtype=bool)
        visible[n_p:, base : base + n_p] = True
    rows = [r for r, a in enumerate(paths, n_p) for _ in a]
    visible[rows, list(itertools.chain.from_iterable(paths))] = True
    return visible


class DraftModel:
    """A draft LM, its KV cache, and where each node of the tree being built sits in it."""

    def __init__(self, model, w: Warp, lm: CachedModel | None = None) -> None:
        self.lm = lm if lm is not None else CachedModel(model)  # or the fast path's
        self.warp = w
        self.pending: list[int] = []  # committed tokens (before the root) not yet in the cache
        self.prefix_len = 0  # committed tokens before the root
        self.path_slots: dict[int, list[int]] = {}  # fed node -> cache slots of root..node
        self.builder: TreeBuilder | None = None  # this iteration's tree
        # NDE features (engine/drafters/delayed/taps.py): keep the last committed token before the
        # root out of the cache, so the first forward of each iteration re-feeds it and returns
        # its logits row too (the draft's distribution at the preceding token)
        self.keep_prev = False

    def start(self, committed: list[int], keep_q: bool = True) -> TreeBuilder:
        """Begin a tree rooted at committed[-1]; drops the previous iteration's nodes.
        keep_q=False: the tree carries no q (for the greedy verifier, on the fast path)."""
        if self.lm.length > self.lm.committed:
            self.lm.commit([])
        self.pending = committed[self.lm.committed : -1]
        self.prefix_len = len(committed) - 1
        self.path_slots = {}
        chain = self.feed_chain if self.lm.fast and self.warp.greedy and not keep_q else None
        self.builder = TreeBuilder(
            self.feed, committed[-1], self.lm.device, keep_q, chain, self.lm.padded
        )
        return self.builder

    def feed(self, b: TreeBuilder, new: list[int], top: int = 0) -> Batch:
        """The Feed of this draft: one forward of the draft LM over the pending committed
        tokens (causal, the first time only) and the nodes `new`, each seeing the committed
        prefix and its own ancestors (ancestor-only mask, position prefix_len + depth).
        top > 0 on the fast path, greedy, for a tree without q: the forward returns each row's
        top-k only."""
        lm = self.lm
        pend, self.pending = self.pending, []
        n_p = len(pend)
        base = lm.length  # first slot of this chunk
        for j, i in enumerate(new):  # ascending, so a parent in this batch comes first
            p = b.parents[i]
            self.path_slots[i] = (self.path_slots[p] if p >= 0 else []) + [base + n_p + j]
        paths = [self.path_slots[i] for i in new]  # each node's ancestors' slots and its own
        visible = chunk_visibility(lm.committed, base, n_p, paths)  # [n, base + n]
        tokens = pend + [b.tokens[i] for i in new]
        positions = [base + j for j in range(n_p)] + [self.prefix_len + b.depth[i] for i in new]
        dev = lm.device
        extra = 1 if self.keep_prev and n_p else 0  # the preceding token's row (keep_prev)
        # [2, n]: one copy for both (numpy builds it faster than torch.tensor from lists)
        ids = to_device(torch.from_numpy(np.array([tokens, positions], dtype=np.int64)), dev)
        inputs = (ids[0], ids[1], to_device(torch.from_numpy(visible), dev))
        nodes = list(new)
        if top and lm.fast and self.warp.greedy and not b.keep_q and not extra:  # top-k only
            p, t = lm.forward(*inputs, keep=len(new), top=top)  # [len(new), top] twice
            lm.committed += n_p
            return Batch(nodes, None, None, t[:, 0], (p, t))
        # the LM head only for the new nodes, not the pending tokens
        logits = lm.forward(*inputs, keep=len(new) + extra)[extra:]  # [len(new), V]
        lm.committed += n_p
        if self.warp.greedy:
            return Batch(nodes, torch.softmax(logits.float(), dim=-1), None, top_token(logits))
        q = warp(logits, self.warp)  # [len(new), V]
        return Batch(nodes, q, q, None)

    def feed_chain(self, b: TreeBuilder, L: int, k: int) -> Batch:
        """The ChainFeed of a fast greedy draft (TreeBuilder.expand_chain): L one-position
        forwards, causal, the first over the pending committed tokens and the root, each next
        one over the previous forward's argmax, left on the device (as engine/iteration/chain.py);
        each returns its top-k from inside the forward. One host read: the chain's tokens,
        added to the builder as nodes 1..L-1. Returns the batch of rows below root..y_(L-1)."""
        lm, dev = self.lm, self.lm.device
        pend, self.pending = self.pending, []
        n_p, base = len(pend), lm.length  # the root's slot: base + n_p (= its position)
        inputs = to_device(pend + [b.tokens[0]], dev)
        positions = torch.arange(base, base + n_p + L, device=dev)  # [n_p + L]
        p, t = lm.forward(inputs, positions[: n_p + 1], keep=1, top=k)  # [1, k] twice
        lm.committed += n_p
        tops = [(p, t)]
        for i in range(1, L):  # position i below y_i, the argmax of position i
            p, t = lm.step(t[:, 0], positions[n_p + i : n_p + i + 1], top=k)
            tops.append((p, t))
        top_p, top_t = torch.cat([p for p, _ in tops]), torch.cat([t for _, t in tops])  # [L, k]
        # the one host read: the whole top-k pair, the chain's tokens among it (y_i = top 1)
        logq_h, tokens_h = read_pair(top_p.double().log(), top_t)
        chain = [0]
        for row in tokens_h[: L - 1]:
            chain.append(b.add(chain[-1], row[0]))
        slots = [base + n_p + j for j in range(L)]
        self.path_slots.update((node, slots[: j + 1]) for j, node in enumerate(chain))
        top = (top_p, top_t)
        return Batch(list(chain), None, None, top_t[:, 0], top, (logq_h, tokens_h))

    def commit(self, path: list[int]) -> None:
        """Keep the cache of the root and of the accepted nodes the draft has seen, in order.

        path: tree nodes below the root, numbered as in the builder's last tree()."""
        numbering = self.builder.numbering if self.builder is not None else None
        kept = []
        for node in [0] + path:
            node = numbering[node] if numbering is not None else node
            if node not in self.path_slots:
                break
            kept.append(self.path_slots[node][-1])
        if self.keep_prev and len(kept) == 1 + len(path):  # re-fed next iteration (keep_prev)
            kept.pop()
        self.lm.commit(kept)
        self.path_slots = {}
