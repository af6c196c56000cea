"""SpecInfer's expansion-based token tree (Miao et al. 2024, Sec. 3.1): a static tree given by
an expansion configuration <k_1, .., k_m>: every node at depth i - 1 gets k_i children; the
k-ary tree of depth m is <k, .., k>.

At temperature > 0 the k_i children of a node are i.i.d. draws from the warped draft
distribution q, sampling="iid" (for SpecInfer's multi-round rejection, Sec. 4.2, the
"specinfer" verifier). Equal draws from one node are merged into one child whose
`multiplicity` counts them (engine/tree.py convention); a child of multiplicity m stands for m
copies, so it gets m * k_{i+1} draws of its own. Greedy: the k_i most probable draft tokens, a
deterministic tree. One draft forward per depth; depth is capped by `remaining`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.draft import DecodeState, TreeBuilder
from engine.tree import Tree, TreeSampling

MAX_NODES = 4096  # a configuration above this is a typo, not an experiment


# how this method draws siblings, at temperature 0 and above (engine/tree.py)
SAMPLING = TreeSampling(greedy="deterministic", sampled="iid")


@dataclass(frozen=True)
class SpecInferConfig:
    k: int = 2  # children per node of the k-ary tree
    depth: int = 4  # levels below the root
    expansion: tuple[int, ...] = ()  # <k_1, .., k_m>; when given it replaces k and depth

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


def build(
    draft: TreeBuilder, state: DecodeState, cfg: SpecInferConfig, gen: torch.Generator
) -> Tree:
    level, mult = [0], [1]  # mult: per builder node, the parent's draws that produced it
    for width in cfg.widths[: state.remaining]:
        if state.draft_warp.greedy:
            children = draft.expand_top(level, width)[1].tolist()  # [n, width]
            level = [draft.add(u, t) for u, row in zip(level, children) for t in row]
            continue
        probs = draft.expand(level)  # [n, V]
        draws = [m * width for m in (mult[u] for u in level)]
        tokens = torch.multinomial(
            probs, max(draws), replacement=True, generator=gen
        ).tolist()  # [n, max draws], i.i.d. per row
        nxt = []
        for u, row, k in zip(level, tokens, draws):
            counts: dict[int, int] = {}
            for t in row[:k]:
                counts[t] = counts.get(t, 0) + 1
            for t, c in counts.items():
                nxt.append(draft.add(u, t))
                mult.append(c)
        level = nxt
    if state.draft_warp.greedy:
        return draft.tree(SAMPLING.greedy)
    return draft.tree(SAMPLING.sampled, multiplicity=mult + [1] * (draft.size - len(mult)))
