"""The toy method's host builder (docs/architecture.md, "Adding a method"): every node down to
`depth` gets its draft's `k` most probable tokens as children, level by level, at every
temperature (deterministic children: NSS verifies them losslessly at T > 0)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.draft import DecodeState, TreeBuilder
from engine.tree import DETERMINISTIC, Tree

SAMPLING = DETERMINISTIC


@dataclass(frozen=True)
class ToyConfig:
    k: int = 2  # children of every node
    depth: int = 2  # levels below the root

    def __post_init__(self) -> None:
        if self.k < 1 or self.depth < 0:
            raise ValueError(f"need k >= 1 and depth >= 0, got k={self.k}, depth={self.depth}")


def build(draft: TreeBuilder, state: DecodeState, cfg: ToyConfig, gen: torch.Generator) -> Tree:
    level = [0]
    for _ in range(min(cfg.depth, state.remaining)):
        children = draft.expand_top(level, cfg.k)[1].tolist()  # [len(level), k]
        level = [draft.add(u, t) for u, row in zip(level, children) for t in row]
    return draft.tree(SAMPLING.greedy)
