"""i.i.d. multi-path drafting: the union of K i.i.d. draft rollouts of length L (delayed-tree
paper Sec. 3.2; SpecTr, SpecInfer, Khisti, Traversal Verification all verify such trees).

Rollouts are grown level by level, one draft forward per level for all distinct nodes of the
level; each rollout draws its next token from the warped draft distribution q of its node. When
rollouts draw the same token from the same node they share the child, whose `multiplicity`
counts them (Def. 3.1: child lists keep duplicates), so the tree has distinct contexts and the
verifiers still see every draw. Parameters as in the paper (Sec. 4.2): branching factor K and
block length L. At temperature 0 the draws are the draft's argmax, so the K rollouts coincide.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.draft import DecodeState, TreeBuilder
from engine.drafters.record import Drafter
from engine.tree import Tree, TreeSampling

# how this method draws siblings, at temperature 0 and above (engine/tree.py)
SAMPLING = TreeSampling(greedy="iid", sampled="iid")


@dataclass(frozen=True)
class IIDConfig:
    K: int = 2  # i.i.d. rollouts (branching factor)
    L: int = 4  # tokens per rollout (block length)

    def __post_init__(self) -> None:
        if self.K < 1 or self.L < 0:
            raise ValueError(f"need K >= 1 and L >= 0, got K={self.K}, L={self.L}")


def grow_rollouts(
    draft: TreeBuilder,
    start: int,
    K: int,
    L: int,
    greedy: bool,
    gen: torch.Generator,
    mult: list[int],
) -> list[list[int]]:
    """Grow K i.i.d. rollouts of L tokens below node `start`, merging equal draws from the same
    node. mult[i] (extended in place for new nodes) counts the draws that produced node i.
    Returns each rollout's node path."""
    return grow_paths(draft, [start] * K, L, greedy, gen, mult)


def grow_paths(
    draft: TreeBuilder,
    starts: list[int],
    L: int,
    greedy: bool,
    gen: torch.Generator,
    mult: list[int],
) -> list[list[int]]:
    """grow_rollouts with one rollout below each of `starts` (rollouts from one node are
    i.i.d. and merge as there), all grown level by level: one draft forward per level."""
    at = list(starts)  # current node of each rollout
    K = len(at)
    paths: list[list[int]] = [[] for _ in range(K)]
    for _ in range(L):
        level = list(dict.fromkeys(at))  # distinct nodes, first-appearance order
        which = [level.index(a) for a in at]  # each rollout's row
        if greedy:  # the draft's top token below each node, [len(level)]
            tokens = draft.expand_top(level, 1)[1][which, 0].tolist()  # [K]
        else:
            rows = draft.expand(level)[which]  # [K, V] each rollout's drafting distribution
            tokens = torch.multinomial(rows, 1, generator=gen)[:, 0].tolist()  # [K]
        children: dict[tuple[int, int], int] = {}
        for r, (node, token) in enumerate(zip(at, tokens)):
            child = children.get((node, token))
            if child is None:
                child = children[(node, token)] = draft.add(node, token)
                mult.append(0)
            mult[child] += 1
            at[r] = child
            paths[r].append(child)
    return paths


def build(draft: TreeBuilder, state: DecodeState, cfg: IIDConfig, gen: torch.Generator) -> Tree:
    mult = [1]  # the root
    grow_rollouts(draft, 0, cfg.K, min(cfg.L, state.remaining), state.draft_warp.greedy, gen, mult)
    return draft.tree(SAMPLING.at(state.draft_warp.greedy), multiplicity=mult)


DRAFTER = Drafter(
    name="iid",
    config=IIDConfig,
    build=build,
    sampling=SAMPLING,
    default_verifier="traversal",  # best on i.i.d. trees in the delayed-tree paper (Table 2)
    nodes=lambda c: c.K * c.L,
    children=lambda c: ("K", c.K),
    # greedy, the K rollouts all draw the draft's argmax and merge into one chain (equal draws
    # from one node share the child); the greedy verifier ignores their multiplicity
    chain=lambda c: c.L,
)
