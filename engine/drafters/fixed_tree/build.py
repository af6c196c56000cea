"""Fixed-shape tree: breadth-first top-`branch` expansion to `depth`, capped at `budget` nodes.

Every node of a level gets its `branch` most probable draft children, in order of decreasing
path probability within the level, until the node budget (root excluded) is spent. This is
the static k-ary token tree of SpecInfer (Miao et al. 2024, Sec. 3) with a node cap; children
are deterministic (top-k), so at temperature > 0 it needs a verifier for deterministic trees.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.draft import DecodeState, TreeBuilder
from engine.transfer import read_pair, to_device
from engine.tree import DETERMINISTIC, Tree

# how this method draws siblings, at temperature 0 and above (engine/tree.py)
SAMPLING = DETERMINISTIC


@dataclass(frozen=True)
class FixedTreeConfig:
    depth: int = 4  # levels below the root
    branch: int = 2  # children per expanded node
    budget: int = 32  # draft nodes at most (root excluded)

    def __post_init__(self) -> None:
        if self.depth < 1 or self.branch < 1 or self.budget < 1:
            raise ValueError("depth, branch and budget must all be >= 1")


def build(
    draft: TreeBuilder, state: DecodeState, cfg: FixedTreeConfig, gen: torch.Generator
) -> Tree:
    level = [0]
    logp = {0: 0.0}  # node -> log path probability under the draft
    for _ in range(min(cfg.depth, state.remaining)):
        room = cfg.budget - (draft.size - 1)
        if room <= 0 or not level:
            break
        top_p, top_t = draft.expand_top(level, cfg.branch)  # [len(level), branch]
        cand = (
            torch.log(top_p.clamp(min=1e-30))
            + to_device([logp[i] for i in level], top_p.device)[:, None]
        )  # [len(level), branch] log path probability of each child
        # one host read per level: the children's log path probabilities and tokens
        cand_h, tokens_h = read_pair(cand, top_t)
        flat = [c for row in cand_h for c in row]
        width = len(cand_h[0])  # branch, or the vocabulary when smaller
        order = sorted(range(len(flat)), key=lambda f: -flat[f])[:room]  # most probable first
        nxt = []
        for f in sorted(order):  # kept children in (parent, rank) order
            row, col = divmod(f, width)
            node = draft.add(level[row], tokens_h[row][col])
            logp[node] = cand_h[row][col]
            nxt.append(node)
        level = nxt
    return draft.tree(SAMPLING.at(state.draft_warp.greedy))
