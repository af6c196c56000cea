"""EAGLE-2's dynamic draft tree by beam search (Li et al. 2024, "EAGLE-2"), as the SALF paper
specifies its baseline ("salf_talf.txt", App. B "Beam search", App. D defaults).

Every node n has the global acceptance estimate V_n = product of the draft probabilities along
its path. Two phases:
1. Tree expansion (top_k, depth): the root is expanded into its top_k children; then, for each
   further depth, the top_k nodes of the deepest layer by V_n are expanded (one draft forward
   per depth) into top_k children each, all of which join the candidate pool.
2. Re-ranking (N): the N candidates with the highest V_n are verified. A child's V_n never
   exceeds its parent's (ties keep the earlier node), so the selection is a valid tree.

N counts drafted tokens (the root is the committed token). Children are deterministic (top-k).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.draft import DecodeState, TreeBuilder
from engine.transfer import read_pair
from engine.tree import DETERMINISTIC, Tree

# how this method draws siblings, at temperature 0 and above (engine/tree.py)
SAMPLING = DETERMINISTIC


@dataclass(frozen=True)
class BeamConfig:
    N: int = 60  # candidate tokens kept by re-ranking (App. D)
    top_k: int = 10  # nodes expanded per depth and children per expanded node (App. D)
    depth: int = 7  # expansion depth (App. D)

    def __post_init__(self) -> None:
        if self.N < 1 or self.top_k < 1 or self.depth < 1:
            raise ValueError(
                f"N, top_k and depth must be >= 1, got {self.N}, {self.top_k}, {self.depth}"
            )


def build(draft: TreeBuilder, state: DecodeState, cfg: BeamConfig, gen: torch.Generator) -> Tree:
    # candidate pool, in creation order: V_n, parent builder node, token
    pool_v: list[float] = []
    pool_parent: list[int] = []
    pool_token: list[int] = []
    node_of: dict[int, int] = {}  # pool index -> builder node (expanded candidates)
    layer_nodes, layer_v = [0], [1.0]
    depth = min(cfg.depth, state.remaining)
    for d in range(depth):
        top_p, top_t = draft.expand_top(layer_nodes, cfg.top_k)  # [k, top_k] twice
        # one host read per depth (float64: the products below are those of the tensors)
        probs, tokens = read_pair(top_p, top_t)
        start = len(pool_v)  # pool index of the first candidate of the deepest layer
        v = [lv * p for lv, row in zip(layer_v, probs) for p in row]  # [k * top_k] V_n
        pool_v += v
        pool_parent += [n for n, row in zip(layer_nodes, probs) for _ in row]
        pool_token += [t for row in tokens for t in row]
        if d + 1 == depth:
            break
        best = sorted(_top(v, cfg.top_k))  # the deepest layer's top_k, in pool order
        layer_nodes = [draft.add(pool_parent[start + i], pool_token[start + i]) for i in best]
        node_of.update({start + i: n for i, n in zip(best, layer_nodes)})
        layer_v = [v[i] for i in best]
    keep = [0]
    for i in sorted(_top(pool_v, cfg.N)):  # re-ranking
        if i not in node_of:
            node_of[i] = draft.add(pool_parent[i], pool_token[i])
        keep.append(node_of[i])
    return draft.tree(SAMPLING.at(state.draft_warp.greedy), keep=keep)


def _top(v: list[float], k: int) -> list[int]:
    """Indices of the k largest values, the earlier index first among ties."""
    return sorted(range(len(v)), key=lambda i: -v[i])[:k]
