"""The draft side of one decoding iteration: a draft LM with its cache, and a tree builder.

Every tree method (engine/drafters/*) grows its tree through `TreeBuilder`: `add` a child,
`expand` nodes to get the draft's next-token distribution below them. `expand` feeds the
nodes that the draft model has not seen yet in one forward pass with the ancestor-only mask,
so a level-by-level builder costs one draft forward per level and a best-first builder one per
popped batch. Committed tokens the draft has not seen yet (the previous bonus token, accepted
nodes that were leaves of the draft tree) ride along in the first forward of the iteration.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.cache import CachedModel
from engine.sampling import Warp, warp
from engine.tree import Tree


@dataclass(frozen=True)
class DecodeState:
    """What a tree builder may know about the decoding so far."""

    prefix_len: int  # committed tokens before the root (= target cache length)
    root_token: int  # the last committed token, node 0 of the tree
    warp: Warp
    remaining: int  # tokens still to emit; a tree deeper than this is wasted work
    history: tuple[int, ...] = ()  # accepted draft tokens of each earlier iteration
    history_depth: tuple[int, ...] = ()  # depth of each earlier iteration's draft tree


class DraftModel:
    """A draft LM, its KV cache, and the node -> cache slot map of the tree being built."""

    def __init__(self, model, w: Warp) -> None:
        self.lm = CachedModel(model)
        self.warp = w
        self.pending: list[int] = []  # committed tokens (before the root) not yet in the cache
        self.slots: dict[int, int] = {}  # tree node -> cache slot, this iteration

    def start(self, committed: list[int]) -> "TreeBuilder":
        """Begin a tree rooted at committed[-1]; drops the previous iteration's nodes."""
        if self.lm.length > self.lm.committed:
            self.lm.commit([])
        self.pending = committed[self.lm.committed:-1]
        self.slots = {}
        return TreeBuilder(self, committed[-1], prefix_len=len(committed) - 1)

    def commit(self, path: list[int]) -> None:
        """Keep the cache of the root and of the accepted nodes the draft has seen, in order."""
        kept = []
        for node in [0] + path:
            if node not in self.slots:
                break
            kept.append(self.slots[node])
        self.lm.commit(kept)
        self.slots = {}


class TreeBuilder:
    """Grows one draft tree in topological order; see the module docstring."""

    def __init__(self, draft: DraftModel, root_token: int, prefix_len: int) -> None:
        self.draft = draft
        self.prefix_len = prefix_len
        self.tokens: list[int] = [root_token]
        self.parents: list[int] = [-1]
        self.depth: list[int] = [0]
        self._q: dict[int, torch.Tensor] = {}  # node -> [V] warped draft distribution
        self._probs: dict[int, torch.Tensor] = {}  # node -> [V] drafting distribution

    @property
    def size(self) -> int:
        return len(self.tokens)

    def add(self, parent: int, token: int) -> int:
        self.tokens.append(int(token))
        self.parents.append(parent)
        self.depth.append(self.depth[parent] + 1)
        return len(self.tokens) - 1

    def add_children(self, parent: int, tokens: list[int]) -> list[int]:
        return [self.add(parent, t) for t in tokens]

    def path_tokens(self, node: int) -> list[int]:
        out = []
        while node > 0:
            out.append(self.tokens[node])
            node = self.parents[node]
        return out[::-1]

    def _ancestors(self, node: int) -> list[int]:
        out = []
        while node >= 0:
            out.append(node)
            node = self.parents[node]
        return out

    def expand(self, nodes: list[int]) -> torch.Tensor:
        """Draft next-token distributions below `nodes`: [len(nodes), V] float32.

        The rows are the drafting distribution: the warped q when sampling (temperature > 0),
        and the plain softmax when greedy (so top-k and confidence rules see real
        probabilities; the tree's q keeps the one-hot greedy distribution).
        """
        new = [i for i in dict.fromkeys(nodes) if i not in self.draft.slots]
        if new:
            self._feed(new)
        return torch.stack([self._probs[i] for i in nodes])

    def _feed(self, new: list[int]) -> None:
        d, lm = self.draft, self.draft.lm
        pend, d.pending = d.pending, []
        n_p, n = len(pend), len(pend) + len(new)
        base = lm.length  # first slot of this chunk
        fed_or_new = set(d.slots) | set(new)
        if any(a not in fed_or_new for i in new for a in self._ancestors(i)):
            raise ValueError("expand() needs every ancestor of a node expanded first or with it")
        col = {i: base + n_p + j for j, i in enumerate(new)}
        col.update(d.slots)
        visible = torch.zeros(n, base + n, dtype=torch.bool)
        visible[:, :lm.committed] = True
        for j in range(n_p):  # pending committed tokens: causal among themselves
            visible[j, base:base + j + 1] = True
        rows, cols = [], []
        for j, i in enumerate(new):
            anc = [col[a] for a in self._ancestors(i)]
            rows += [n_p + j] * len(anc)
            cols += anc
        visible[n_p:, base:base + n_p] = True
        visible[torch.tensor(rows), torch.tensor(cols)] = True
        tokens = pend + [self.tokens[i] for i in new]
        positions = [base + j for j in range(n_p)] + [self.prefix_len + self.depth[i] for i in new]
        dev = lm.device
        logits = lm.forward(torch.tensor(tokens, device=dev), torch.tensor(positions, device=dev),
                            visible.to(dev))[n_p:]  # [len(new), V]
        lm.committed += n_p
        q = warp(logits, d.warp)  # [len(new), V]
        probs = q if not d.warp.greedy else torch.softmax(logits.float(), dim=-1)
        for j, i in enumerate(new):
            d.slots[i] = base + n_p + j
            self._q[i], self._probs[i] = q[j], probs[j]

    def tree(self, sampling: str = "deterministic", keep: list[int] | None = None) -> Tree:
        """Freeze into a Tree; q rows of nodes that were never expanded are zero.

        keep: the nodes to verify, a prefix-closed set containing the root (None: all). Builders
        that grow candidates and then select a subset (EAGLE-2 re-ranking, SALF's capacity-N
        set, DDTree's top-B prefixes over a rolled-out chain) pass it. Kept nodes are renumbered
        in their builder order (still topological) and the draft's node -> cache slot map is
        renumbered with them, so the decode loop's `commit(path)` keeps the right cache slots.
        """
        dev = self.draft.lm.device
        if keep is None:
            idx = list(range(self.size))
            tokens, parents, depth = self.tokens, self.parents, self.depth
        else:
            idx = sorted(set(keep))
            new_of = {old: new for new, old in enumerate(idx)}
            if not idx or idx[0] != 0 or any(self.parents[i] not in new_of for i in idx[1:]):
                raise ValueError("keep must contain the root and the parent of every kept node")
            tokens = [self.tokens[i] for i in idx]
            parents = [-1] + [new_of[self.parents[i]] for i in idx[1:]]
            depth = [self.depth[i] for i in idx]
            self.draft.slots = {new_of[i]: s for i, s in self.draft.slots.items() if i in new_of}
        q = None
        if self._q:
            v = next(iter(self._q.values())).shape[-1]
            q = torch.zeros(len(idx), v, device=dev)
            rows = [j for j, i in enumerate(idx) if i in self._q]
            if rows:
                q[rows] = torch.stack([self._q[idx[j]] for j in rows])
        return Tree(tokens=torch.tensor(tokens, device=dev),
                    parents=torch.tensor(parents, device=dev),
                    depth=torch.tensor(depth, device=dev), q=q, sampling=sampling)
