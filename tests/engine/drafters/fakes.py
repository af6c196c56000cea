"""A model-free draft for exact builder tests: the draft's next-token distribution is a fixed
function of the path (tokens below the root), so expected trees can be computed by brute
force. `PathFeed` is the Feed given to a real TreeBuilder in place of the draft LM, so the
builder's bookkeeping (expand's ancestor check, add, tree(keep=...)) is the real one."""

from __future__ import annotations

import itertools
import zlib
from typing import Callable

import torch

from engine.draft import Batch, DecodeState, TreeBuilder
from engine.sampling import Warp

NextProbs = Callable[[tuple[int, ...]], torch.Tensor]  # path tokens -> [V]


def random_next_probs(vocab: int, seed: int = 0, sharpness: float = 2.0) -> NextProbs:
    """A deterministic pseudo-random distribution per path (no exact ties, all entries > 0)."""

    def next_probs(path: tuple[int, ...]) -> torch.Tensor:
        key = zlib.crc32(repr((seed, path)).encode())
        g = torch.Generator().manual_seed(key)
        return torch.softmax(
            sharpness * torch.randn(vocab, generator=g, dtype=torch.float64), -1
        ).float()

    return next_probs


class PathFeed:
    """A Feed whose distribution below a node is next_probs(path); it is also the tree's q.

    top_only: answer a request for the top-k (expand_top) of a tree without q with the top-k
    pair alone, as the fast path's greedy draft does (no probs, no q)."""

    def __init__(self, next_probs: NextProbs, top_only: bool = False) -> None:
        self.next_probs = next_probs
        self.top_only = top_only
        self.fed: list[list[int]] = []  # the new nodes of every draft "forward"

    def __call__(self, builder: TreeBuilder, new: list[int], top: int = 0) -> Batch:
        self.fed.append(list(new))
        probs = torch.stack([self.next_probs(tuple(builder.path_tokens(i))) for i in new])
        if top and self.top_only and not builder.keep_q:
            p, t = probs.topk(min(top, probs.shape[-1]), dim=-1)  # [n, top] twice
            return Batch(list(new), None, None, t[:, 0], (p, t))
        return Batch(nodes=list(new), probs=probs, q=probs, argmax=None)  # [n, V]


def fake_builder(next_probs: NextProbs, root_token: int = 0) -> TreeBuilder:
    return TreeBuilder(PathFeed(next_probs), root_token)


def state(
    remaining: int = 1000, temperature: float = 0.0, history=(), history_depth=(), history_size=()
):
    return DecodeState(
        prefix_len=0,
        root_token=0,
        warp=Warp(temperature),
        remaining=remaining,
        history=tuple(history),
        history_depth=tuple(history_depth),
        history_size=tuple(history_size),
    )


def path_prob(next_probs: NextProbs, path: tuple[int, ...]) -> float:
    prob = 1.0
    for d in range(len(path)):
        prob *= float(next_probs(path[:d])[path[d]])
    return prob


def all_prefixes(vocab: int, max_depth: int):
    for d in range(1, max_depth + 1):
        yield from itertools.product(range(vocab), repeat=d)


def tree_paths(tree) -> list[tuple[int, ...]]:
    """Token path of every non-root node."""
    tokens = tree.tokens.tolist()
    return [tuple(tokens[j] for j in tree.path_to(i)) for i in range(1, tree.size)]


def check_tree(tree, budget: int | None = None, max_depth: int | None = None) -> None:
    """Topological order, consistent depth, budget (drafted nodes) and depth bound."""
    parents, depth = tree.parents.tolist(), tree.depth.tolist()
    assert parents[0] == -1 and depth[0] == 0
    for i in range(1, tree.size):
        assert 0 <= parents[i] < i
        assert depth[i] == depth[parents[i]] + 1
    if budget is not None:
        assert tree.size - 1 <= budget
    if max_depth is not None:
        assert max(depth) <= max_depth
