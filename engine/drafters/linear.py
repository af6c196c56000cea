"""Linear drafting: a chain of k draft tokens (Leviathan et al. 2023; Chen et al. 2023).

Greedy: each token is the draft's argmax. Sampling: each token is drawn from the warped draft
distribution q, so the chain is one i.i.d. rollout (sampling="iid") for speculative sampling.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.draft import DecodeState, TreeBuilder
from engine.sampling import sample
from engine.tree import Tree, TreeSampling

# how this method draws siblings, at temperature 0 and above (engine/tree.py)
SAMPLING = TreeSampling(greedy="deterministic", sampled="iid")


@dataclass(frozen=True)
class LinearConfig:
    k: int = 4  # draft tokens per iteration (gamma in Leviathan et al.)

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")


def build(draft: TreeBuilder, state: DecodeState, cfg: LinearConfig, gen: torch.Generator) -> Tree:
    node = 0
    for _ in range(min(cfg.k, state.remaining)):
        probs = draft.expand([node])[0]  # [V]
        token = int(probs.argmax()) if state.warp.greedy else int(sample(probs, gen))
        node = draft.add(node, token)
    return draft.tree(SAMPLING.at(state.warp.greedy))
