"""Greedy verification (temperature 0): follow the child whose token equals the target's
argmax, as long as one exists; the bonus is the argmax after the last accepted node.
Reproduces the target's own greedy decoding token for token (SpecInfer Sec. 4.2, greedy case)."""

from __future__ import annotations

import torch

from engine.sampling import top_token
from engine.tree import SAMPLING_MODES, Tree
from engine.verify.common import Accept

# any tree, at temperature 0 only (the registry in engine/verify/__init__.py says so)
MODES = SAMPLING_MODES


def verify(tree: Tree, p: torch.Tensor, gen: torch.Generator | None = None) -> Accept:
    """p: [N, V] target distribution after each node (one-hot at temperature 0), or the
    target's logits, which have the same argmax (the fast path passes those)."""
    return follow(tree, top_token(p))


def follow(tree: Tree, best: torch.Tensor) -> Accept:
    """best: [N] the target's greedy token after each node."""
    return read_and_walk(tree, best)[0]


def read_and_walk(tree: Tree, best: torch.Tensor) -> tuple[Accept, list[int], list[int], list[int]]:
    """follow(), and best, the tree's tokens and its parents on the host (the decode loop's
    new tokens and acceptance counts come from them, with no second read). One host read."""
    n = tree.size
    read = torch.cat([best, tree.tokens.to(best.device), tree.parents.to(best.device)]).tolist()
    best_h, tokens, parents = read[:n], read[n : 2 * n], read[2 * n :]
    return walk(best_h, tokens, parents), best_h, tokens, parents


def walk(best: list[int], tokens: list[int], parents: list[int]) -> Accept:
    """The greedy walk over a tree read to the host: from the root, follow the child whose
    token is the target's greedy token after its parent, while one exists."""
    children: dict[int, list[int]] = {}
    for i in range(1, len(tokens)):
        children.setdefault(parents[i], []).append(i)
    node, path = 0, []
    while True:
        match = next((c for c in children.get(node, []) if tokens[c] == best[node]), None)
        if match is None:
            return Accept(path=path, token=best[node])
        path.append(match)
        node = match
