"""The tree builder every tree method (engine/drafters/*) grows its tree through: `add` a child,
`expand` nodes to get the draft's next-token distribution below them. `expand` feeds the
nodes that the draft model has not seen yet in one forward pass with the ancestor-only mask,
so a level-by-level builder costs one draft forward per level and a best-first builder one per
popped batch. Committed tokens the draft has not seen yet (the previous bonus token, accepted
nodes that were leaves of the draft tree) ride along in the first forward of the iteration.

The builder itself only keeps the tree and the distributions it was given; the forward is a
`Feed` passed to it: `DraftModel.feed` (engine/draft/model.py: draft LM, cache slots, mask) in
decoding, a fixed function of the path in the model-free tests (tests/engine/drafters/fakes.py).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import torch

from engine.transfer import to_device
from engine.tree import Tree


class Batch(NamedTuple):
    """One draft forward: the nodes it fed and the draft's distributions below them."""

    nodes: list[int]  # [n] builder nodes, ascending
    probs: torch.Tensor  # [n, V] drafting distribution, what expand() returns
    q: torch.Tensor | None  # [n, V] the tree's q rows (warped q); None when greedy
    argmax: torch.Tensor | None  # [n] greedy only: the draft's argmax, where q is one-hot
    # ([n, k] probabilities descending, [n, k] tokens): the top-k of probs, computed inside
    # the draft forward (fast path, greedy: then probs is None); None: take them from probs
    top: tuple[torch.Tensor, torch.Tensor] | None = None
    # the top pair as host lists ([n][k] log probabilities, [n][k] ints), where the feed read
    # it anyway (feed_chain), so that its user does not read it again; logs taken on the
    # device, as the user would (DDTree's Algorithm 1 sums them)
    host: tuple[list[list[float]], list[list[int]]] | None = None


ChainFeed = Callable[["TreeBuilder", int, int], Batch]
"""chain_feed(builder, L, k) -> Batch: the draft's greedy chain of L positions below the root,
fed without a host read per position (DraftModel.feed_chain); see TreeBuilder.expand_chain."""

Feed = Callable[..., Batch]
"""feed(builder, new, top=0) -> Batch: the draft forward below `new` (ascending builder nodes,
each one's parent fed before or in `new`); top > 0 asks for the top-k of each row (a Feed may
ignore it and return probs). DraftModel.feed runs the draft LM; tests pass a fake."""


class TreeBuilder:
    """Grows one draft tree in topological order; see the module docstring."""

    def __init__(
        self,
        feed: Feed,
        root_token: int,
        device: torch.device | None = None,
        keep_q: bool = True,
        chain_feed: ChainFeed | None = None,
        wide: bool = False,
    ) -> None:
        self.feed = feed
        self.chain_feed = chain_feed  # expand_chain's forwards, when the draft has them
        # a draft forward of a few rows costs about one of a single row (padded graph forwards):
        # a best-first builder may expand the nodes it may need next with the one it needs now
        self.wide = wide
        self.keep_q = keep_q  # False: tree() leaves q None (a greedy verifier never reads it)
        self.device = device or torch.device("cpu")  # where tree() puts the Tree
        self.tokens: list[int] = [root_token]
        self.parents: list[int] = [-1]
        self.depth: list[int] = [0]
        # numbering[k]: the builder node that became node k of the last tree() (None: before)
        self.numbering: list[int] | None = None
        self._rows: dict[int, tuple[int, int]] = {}  # expanded node -> (batch, row)
        self._batches: list[Batch] = []  # one per draft forward
        self.vocab = 0  # the draft's vocabulary size, once a fed batch showed it (0: unknown)

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

    def expand(self, nodes: list[int]) -> torch.Tensor:
        """Draft next-token distributions below `nodes`: [len(nodes), V] float32.

        The rows are the drafting distribution: the warped q when sampling (temperature > 0),
        and the plain softmax when greedy (so top-k and confidence rules see real
        probabilities; the tree's q keeps the one-hot greedy distribution).
        """
        batch = self._feed(nodes, 0)
        if batch is not None:  # the usual case: one batch, asked for in its own order
            return batch.probs
        rows = [(self._batches[b], r) for b, r in (self._rows[i] for i in nodes)]
        if any(b.probs is None for b, _ in rows):
            raise ValueError("expand() of nodes fed for their top-k only (expand_top)")
        return torch.stack([b.probs[r] for b, r in rows])

    def expand_top(self, nodes: list[int], k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The k most probable children below each node: (probs [n, k] descending, tokens
        [n, k]), as `expand(nodes).topk(k)`. A greedy draft on the fast path computes them
        inside its forward (CachedModel.forward top=k), so no [n, V] softmax is built; for a
        tree builder that only ranks children (DynaTree, SALF, EAGLE-2 beam, DDTree)."""
        k = min(k, self.vocab) if self.vocab else k
        batch = self._feed(nodes, k)
        k = min(k, self.vocab) if self.vocab else k  # the feed may have shown the vocabulary
        if batch is not None:
            return _top_of(batch, slice(None), k)
        rows = [_top_of(self._batches[b], r, k) for b, r in (self._rows[i] for i in nodes)]
        return torch.stack([p for p, _ in rows]), torch.stack([t for _, t in rows])  # [n, k]

    def expand_chain(self, L: int, k: int):
        """The draft's greedy chain below the root: positions 1..L, each one's top-k below the
        chain before it, ([L, k] probabilities, [L, k] tokens), the chain's nodes [root,
        y_1, .., y_(L-1)] (added to the tree; y_i the top token of position i), and the top-k
        pair as host lists when it was read already (Batch.host), else None. A fast greedy
        draft (chain_feed) feeds each position's argmax to the next forward on the device, with
        one host read for the whole chain; otherwise one expand_top per position."""
        if self.chain_feed is not None and self.size == 1 and not self._rows:
            batch = self.chain_feed(self, L, k)
            chain = list(range(self.size))  # the root and the L - 1 nodes the feed added
            self.record(batch, chain)
            return batch.top[0], batch.top[1], chain, batch.host
        chain, rows = [0], []
        for i in range(L):
            top_p, top_t = self.expand_top([chain[-1]], k)  # [1, k] twice
            rows.append((top_p[0], top_t[0]))
            if i + 1 < L:
                chain.append(self.add(chain[-1], int(top_t[0, 0])))
        return torch.stack([p for p, _ in rows]), torch.stack([t for _, t in rows]), chain, None

    def record(self, batch: Batch, nodes: list[int]) -> None:
        """Keep a fed batch: its rows are the distributions below `nodes` (batch.nodes)."""
        self._rows.update((i, (len(self._batches), j)) for j, i in enumerate(nodes))
        self._batches.append(batch)

    def _feed(self, nodes: list[int], top: int) -> Batch | None:
        """Feed the nodes the draft has not seen; returns the new batch when it is exactly
        `nodes` in order (the usual case), else None (read their rows through _rows)."""
        new = sorted({i for i in nodes if i not in self._rows})  # topological: parents first
        if not new:
            return None
        new_set = set(new)
        if any(
            p >= 0 and p not in self._rows and p not in new_set
            for p in (self.parents[i] for i in new)
        ):
            raise ValueError("expand() needs every ancestor of a node expanded first or with it")
        batch = self.feed(self, new, top=top) if top else self.feed(self, new)
        self.record(batch, new)
        if batch.probs is not None:
            self.vocab = batch.probs.shape[-1]
        elif batch.top[0].shape[-1] < top:  # asked for more than the vocabulary
            self.vocab = batch.top[0].shape[-1]
        return batch if new == nodes else None

    def tree(
        self,
        sampling: str = "deterministic",
        keep: list[int] | None = None,
        multiplicity: list[int] | None = None,
        order: list[int] | None = None,
    ) -> Tree:
        """Freeze into a Tree; q rows of nodes that were never expanded are zero.

        keep: the nodes to verify, a prefix-closed set containing the root (None: all). Builders
        that grow candidates and then select a subset (EAGLE-2 re-ranking, SALF's capacity-N
        set, DDTree's top-B prefixes over a rolled-out chain) pass it. Kept nodes are renumbered
        in their builder order (still topological); `numbering` records which builder node
        each tree node is, so that the decode loop's `DraftModel.commit(path)` keeps the right
        cache slots.
        multiplicity: per builder node, how many of its parent's i.i.d. draws produced it (see
        Tree).
        order: the kept nodes in the order to number them (a topological order, root first),
        e.g. DySpec's DFS order for block-sparse tree attention (App. C); default builder order.
        """
        dev = self.device
        if keep is None and order is None:  # every node, in builder order (topological)
            old_of, new_of = list(range(self.size)), list(range(self.size))
            tokens, parents, depth = self.tokens, self.parents, self.depth
        else:
            old_of, new_of = renumber(self.parents, keep, order)  # [n], [size]
            parents = [-1] + [new_of[self.parents[i]] for i in old_of[1:]]
            tokens, depth = [self.tokens[i] for i in old_of], [self.depth[i] for i in old_of]
        self.numbering = old_of
        q = None
        if self.keep_q:
            q = gather_q(self._batches, torch.tensor(new_of), len(old_of), dev)
        host = to_device([tokens, parents, depth], dev)  # [3, n]: one copy for the three
        return Tree(
            tokens=host[0],
            parents=host[1],
            depth=host[2],
            q=q,
            sampling=sampling,
            multiplicity=None
            if multiplicity is None
            else to_device([multiplicity[i] for i in old_of], dev, torch.long),
            height=max(depth),
            host_parents=tuple(parents),
        )


def renumber(
    parents: list[int], keep: list[int] | None, order: list[int] | None
) -> tuple[list[int], list[int]]:
    """The builder nodes that tree(keep, order) keeps, and their numbers in the Tree (plain
    Python: host bookkeeping, no tensor to read).

    Returns old_of [n], the builder node of each tree node (root first, topological), and
    new_of [len(parents)], the tree node of each builder node (-1: dropped).
    """
    old_of = sorted(set(keep)) if keep is not None else list(range(len(parents)))
    if order is not None:
        if sorted(order) != old_of:
            raise ValueError("order must list exactly the kept nodes")
        old_of = list(order)
    new_of = [-1] * len(parents)  # [size]
    if old_of and old_of[0] == 0:
        for i, old in enumerate(old_of):
            new_of[old] = i
        # every kept node's parent is kept and numbered before it
        if all(0 <= new_of[parents[old]] < i for i, old in enumerate(old_of[1:], 1)):
            return old_of, new_of
    raise ValueError(
        "keep must contain the root and the parent of every kept node, "
        "and order must list parents before their children"
    )


def _top_of(batch: Batch, rows, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The top-k pair of a batch's `rows` (an index or a slice): its own top when it holds
    one that wide, else from its probs."""
    if batch.top is not None and batch.top[0].shape[-1] >= k:
        return batch.top[0][rows, :k], batch.top[1][rows, :k]
    if batch.probs is None:
        raise ValueError(f"this draft batch holds its top {batch.top[0].shape[-1]} only, not {k}")
    probs = batch.probs[rows]
    return probs.topk(min(k, probs.shape[-1]), dim=-1)


def gather_q(
    batches: list[Batch], new_of: torch.Tensor, n: int, device: torch.device
) -> torch.Tensor | None:
    """The Tree's q [n, V]: each kept fed node's q row at its tree index (one-hot at the
    draft's argmax when greedy); zero rows for nodes never expanded. None if nothing was fed."""
    if not batches:
        return None
    q = torch.zeros(n, batches[0].probs.shape[-1], device=device)  # [n, V]
    for b in batches:
        rows = new_of[b.nodes]  # [b] tree node, -1 if dropped
        sel = (rows >= 0).nonzero().flatten()  # [k] batch rows that were kept
        if sel.numel() == 0:
            continue
        rows = to_device(rows[sel], device)
        if b.q is None:  # greedy: one-hot at the draft's argmax
            q[rows, b.argmax[sel.to(b.argmax.device)]] = 1.0
        else:
            q[rows] = b.q[sel.to(b.q.device)]
    return q
