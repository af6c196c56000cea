"""SpecInfer's expansion-based token tree (Miao et al. 2024, Sec. 3.1): a static tree given by
an expansion configuration <k_1, .., k_m>: every node at depth i - 1 gets k_i children; the
k-ary tree of depth m is <k, .., k>.

At temperature > 0 the k_i children of a node are i.i.d. draws from the warped draft
distribution q (duplicates kept: the multi-step speculative sampling verifier of SpecInfer,
Sec. 4.2, needs the raw i.i.d. draws to be lossless), sampling="iid". Greedy: the k_i most
probable draft tokens, a deterministic tree. One draft forward per depth; depth is capped by
`remaining`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.draft import DecodeState, TreeBuilder
from engine.tree import Tree

MAX_NODES = 4096  # a configuration above this is a typo, not an experiment


@dataclass(frozen=True)
class SpecInferConfig:
    k: int = 2  # children per node of the k-ary tree
    depth: int = 4  # levels below the root
    expansion: tuple[int, ...] = ()  # <k_1, .., k_m>; when given it replaces k and depth
    default_verifier = "specinfer"

    def __post_init__(self) -> None:
        if self.k < 1 or self.depth < 1 or any(w < 1 for w in self.expansion):
            raise ValueError("k, depth and every expansion width must be >= 1")
        size, level = 0, 1
        for w in self.widths:
            level *= w
            size += level
        if size > MAX_NODES:
            raise ValueError(f"the expansion {self.widths} has {size} nodes (> {MAX_NODES})")

    @property
    def widths(self) -> tuple[int, ...]:
        return self.expansion or (self.k,) * self.depth


def build(draft: TreeBuilder, state: DecodeState, cfg: SpecInferConfig,
          gen: torch.Generator) -> Tree:
    level = [0]
    for width in cfg.widths[:state.remaining]:
        probs = draft.expand(level)  # [n, V]
        if state.warp.greedy:
            children = probs.topk(min(width, probs.shape[-1]), dim=-1).indices  # [n, width]
        else:
            children = torch.multinomial(probs, width, replacement=True, generator=gen)
        level = [draft.add(parent, token) for parent, row in zip(level, children.tolist())
                 for token in row]
    return draft.tree("deterministic" if state.warp.greedy else "iid")
