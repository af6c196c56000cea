"""The draft side of one decoding iteration: a draft LM with its cache, and a tree builder.

Every tree method (engine/drafters/*) grows its tree through `TreeBuilder`: `add` a child,
`expand` nodes to get the draft's next-token distribution below them. `expand` feeds the
nodes that the draft model has not seen yet in one forward pass with the ancestor-only mask,
so a level-by-level builder costs one draft forward per level and a best-first builder one per
popped batch. Committed tokens the draft has not seen yet (the previous bonus token, accepted
nodes that were leaves of the draft tree) ride along in the first forward of the iteration.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import NamedTuple

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


class Batch(NamedTuple):
    """One draft forward: the nodes it fed and the draft's distributions below them."""

    nodes: torch.Tensor  # [n] builder nodes, ascending
    probs: torch.Tensor  # [n, V] drafting distribution, what expand() returns
    q: torch.Tensor | None  # [n, V] the tree's q rows (warped q); None when greedy
    argmax: torch.Tensor | None  # [n] greedy only: the draft's argmax, where q is one-hot


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
        self._rows: dict[int, tuple[int, int]] = {}  # expanded node -> (batch, row)
        self._batches: list[Batch] = []  # one per draft forward
        self._anc: dict[int, list[int]] = {}  # fed node -> cache slots of its path from root

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
        new = sorted({i for i in nodes if i not in self._rows})  # topological: parents first
        if new:
            self._feed(new)
            if new == nodes:  # the usual case: one batch, asked for in its own order
                return self._batches[-1].probs
        return torch.stack([self._batches[b].probs[r] for b, r in (self._rows[i] for i in nodes)])

    def _store(self, new: list[int], probs: torch.Tensor, q: torch.Tensor | None,
               argmax: torch.Tensor | None) -> None:
        """Record one fed batch: new nodes (ascending), their drafting distributions, and
        the tree's q rows (warped q, or the argmax of a greedy draft)."""
        b = len(self._batches)
        self._batches.append(Batch(torch.tensor(new), probs, q, argmax))
        self._rows.update((i, (b, j)) for j, i in enumerate(new))

    def _feed(self, new: list[int]) -> None:
        d, lm = self.draft, self.draft.lm
        new_set = set(new)
        if any(p >= 0 and p not in self._anc and p not in new_set
               for p in (self.parents[i] for i in new)):
            raise ValueError("expand() needs every ancestor of a node expanded first or with it")
        pend, d.pending = d.pending, []
        n_p, n = len(pend), len(pend) + len(new)
        base = lm.length  # first slot of this chunk
        for j, i in enumerate(new):  # ascending, so a parent in this batch comes first
            p, slot = self.parents[i], base + n_p + j
            self._anc[i] = [slot] if p < 0 else self._anc[p] + [slot]
            d.slots[i] = slot
        visible = torch.zeros(n, base + n, dtype=torch.bool)
        visible[:, :lm.committed] = True
        if n_p:  # pending committed tokens: causal among themselves, seen by every node
            visible[:n_p, base:base + n_p] = torch.ones(n_p, n_p, dtype=torch.bool).tril()
            visible[n_p:, base:base + n_p] = True
        paths = [self._anc[i] for i in new]
        rows = torch.arange(n_p, n).repeat_interleave(torch.tensor([len(a) for a in paths]))
        visible[rows, torch.tensor(list(itertools.chain.from_iterable(paths)))] = True
        tokens = pend + [self.tokens[i] for i in new]
        positions = [base + j for j in range(n_p)] + [self.prefix_len + self.depth[i] for i in new]
        dev = lm.device
        logits = lm.forward(torch.tensor(tokens, device=dev), torch.tensor(positions, device=dev),
                            visible.to(dev))[n_p:]  # [len(new), V]
        lm.committed += n_p
        if d.warp.greedy:
            self._store(new, torch.softmax(logits.float(), dim=-1), None, logits.argmax(-1))
        else:
            q = warp(logits, d.warp)  # [len(new), V]
            self._store(new, q, q, None)

    def tree(self, sampling: str = "deterministic", keep: list[int] | None = None,
             multiplicity: list[int] | None = None, order: list[int] | None = None) -> Tree:
        """Freeze into a Tree; q rows of nodes that were never expanded are zero.

        keep: the nodes to verify, a prefix-closed set containing the root (None: all). Builders
        that grow candidates and then select a subset (EAGLE-2 re-ranking, SALF's capacity-N
        set, DDTree's top-B prefixes over a rolled-out chain) pass it. Kept nodes are renumbered
        in their builder order (still topological) and the draft's node -> cache slot map is
        renumbered with them, so the decode loop's `commit(path)` keeps the right cache slots.
        multiplicity: per builder node, how many of its parent's i.i.d. draws produced it (see
        Tree).
        order: the kept nodes in the order to number them (a topological order, root first),
        e.g. DySpec's DFS order for block-sparse tree attention (App. C); default builder order.
        """
        dev = self.draft.lm.device
        if keep is None and order is None:
            n = self.size
            idx = range(n)
            tokens, parents, depth = self.tokens, self.parents, self.depth
            new_of = torch.arange(n)
        else:
            idx = sorted(set(keep)) if keep is not None else list(range(self.size))
            if order is not None:
                if sorted(order) != idx:
                    raise ValueError("order must list exactly the kept nodes")
                idx = list(order)
            pos = {old: new for new, old in enumerate(idx)}
            if not idx or idx[0] != 0 or any(pos.get(self.parents[i], n_) >= n_ for n_, i in
                                             enumerate(idx[1:], start=1)):
                raise ValueError("keep must contain the root and the parent of every kept node, "
                                 "and order must list parents before their children")
            n = len(idx)
            tokens = [self.tokens[i] for i in idx]
            parents = [-1] + [pos[self.parents[i]] for i in idx[1:]]
            depth = [self.depth[i] for i in idx]
            self.draft.slots = {pos[i]: s for i, s in self.draft.slots.items() if i in pos}
            new_of = torch.full((self.size,), -1, dtype=torch.long)
            new_of[idx] = torch.arange(n)
        q = None
        if self._batches:
            q = torch.zeros(n, self._batches[0].probs.shape[-1], device=dev)
            for nodes, _, qb, argmax in self._batches:
                rows = new_of[nodes]  # [b] new index, -1 if dropped
                sel = (rows >= 0).nonzero().flatten()
                if sel.numel() == 0:
                    continue
                rows = rows[sel].to(dev)
                if qb is None:  # greedy: one-hot at the draft's argmax
                    q[rows, argmax[sel.to(argmax.device)]] = 1.0
                else:
                    q[rows] = qb[sel.to(qb.device)]
        return Tree(tokens=torch.tensor(tokens, device=dev),
                    parents=torch.tensor(parents, device=dev),
                    depth=torch.tensor(depth, device=dev), q=q, sampling=sampling,
                    multiplicity=None if multiplicity is None else torch.tensor(
                        [multiplicity[i] for i in idx],
                        dtype=torch.long, device=dev))
