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
    # candidate pool, in creation order: V_n, parent builder node, token, builder node or -1
    pool_v: list[torch.Tensor] = []
    pool_parent: list[torch.Tensor] = []
    pool_token: list[torch.Tensor] = []
    node_of: dict[int, int] = {}  # pool index -> builder node (expanded candidates)
    layer_nodes, layer_v = [0], torch.ones(1, dtype=torch.float64)
    start = 0  # pool index of the first candidate of the deepest layer
    for d in range(min(cfg.depth, state.remaining)):
        top_p, top_t = draft.expand_top(layer_nodes, cfg.top_k)  # [k, top_k]
        v = (layer_v[:, None] * top_p.double().cpu()).flatten()  # [k * top_k]
        start = sum(x.shape[0] for x in pool_v)
        pool_v.append(v)
        pool_parent.append(torch.tensor(layer_nodes).repeat_interleave(top_p.shape[-1]))
        pool_token.append(top_t.cpu().flatten())
        if d + 1 == min(cfg.depth, state.remaining):
            break
        best = _top(v, min(cfg.top_k, v.shape[0])).sort().values  # deepest layer's top_k
        parents, tokens = pool_parent[-1][best].tolist(), pool_token[-1][best].tolist()
        layer_nodes = [draft.add(p, t) for p, t in zip(parents, tokens)]
        node_of.update({start + i: n for i, n in zip(best.tolist(), layer_nodes)})
        layer_v = v[best]
    all_v = torch.cat(pool_v)
    all_parent, all_token = torch.cat(pool_parent).tolist(), torch.cat(pool_token).tolist()
    keep = [0]
    for i in _top(all_v, min(cfg.N, all_v.shape[0])).sort().values.tolist():  # re-ranking
        if i not in node_of:
            node_of[i] = draft.add(all_parent[i], all_token[i])
        keep.append(node_of[i])
    return draft.tree(SAMPLING.at(state.draft_warp.greedy), keep=keep)


def _top(v: torch.Tensor, k: int) -> torch.Tensor:
    """Indices of the k largest values, the earlier index first among ties."""
    return torch.sort(v, descending=True, stable=True).indices[:k]
