"""Delayed tree expansion (delayed-tree paper Sec. 5, Def. 5.2): a (K, L1, L2)-delayed tree
drafts a single path of L1 tokens from the draft, then branches into K i.i.d. rollouts of L2
tokens below its last node (the branching point). Trunk nodes are single draws (multiplicity
1); below the branching point equal draws are merged with their multiplicity as in
engine/drafters/iid.py. L1 = 0 is the i.i.d. tree (K, L2); K = 1 a single path of L1 + L2.
OT-based verifiers stay lossless on it because each node's children are i.i.d. draws from the
node's q (Sec. 5); Traversal Verification too (engine/verify/traversal.py).

selector: "fixed" drafts the static action (K, L1, L2) every step; "nde" lets the trained NDE
selector (Sec. 6, engine/drafters/delayed/selector.py) choose (K, L1, L2) at each step from root
features, from the checkpoint `selector_checkpoint` (`orch train nde`); K, L1, L2 are then unused.
The selector changes which tree is drafted, never the law of the output.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

import torch

from engine.checkpoint import find
from engine.config import ADDED_LATER, ConfigError
from engine.draft import DecodeState, TreeBuilder
from engine.drafters.iid import grow_rollouts
from engine.tree import Tree, TreeSampling

# how this method draws siblings, at temperature 0 and above (engine/tree.py)
SAMPLING = TreeSampling(greedy="iid", sampled="iid")


@dataclass(frozen=True)
class DelayedConfig:
    K: int = 2  # branching factor at the branching point
    L1: int = 2  # trunk (single path) length
    L2: int = 2  # length of each i.i.d. branch
    selector: Literal["fixed", "nde"] = field(default="fixed", metadata=ADDED_LATER)
    selector_checkpoint: str | None = field(default=None, metadata=ADDED_LATER)

    def __post_init__(self) -> None:
        if self.K < 1 or self.L1 < 0 or self.L2 < 0:
            raise ValueError(
                f"need K >= 1, L1 >= 0, L2 >= 0, got K={self.K}, L1={self.L1}, L2={self.L2}"
            )
        if self.selector == "nde":
            if not self.selector_checkpoint:
                raise ConfigError(
                    "selector: nde needs selector_checkpoint: NAME (an `orch train nde` checkpoint)"
                )
            find(self.selector_checkpoint, "nde")  # exists, finished, of kind nde
        elif self.selector_checkpoint is not None:
            raise ConfigError("selector_checkpoint is only used with selector: nde")


def build(draft: TreeBuilder, state: DecodeState, cfg: DelayedConfig, gen: torch.Generator) -> Tree:
    if cfg.selector == "nde":  # Sec. 6: the selector picks this step's (K, L1, L2)
        cfg = replace(cfg, selector="fixed", selector_checkpoint=None, **choose(draft, state))
    trunk = min(cfg.L1, state.remaining)
    mult = [1]
    grow_rollouts(draft, 0, 1, trunk, state.draft_warp.greedy, gen, mult)  # the single path
    branch = min(cfg.L2, state.remaining - trunk)
    grow_rollouts(draft, draft.size - 1, cfg.K, branch, state.draft_warp.greedy, gen, mult)
    return draft.tree(SAMPLING.at(state.draft_warp.greedy), multiplicity=mult)


def choose(draft: TreeBuilder, state: DecodeState) -> dict[str, int]:
    """The NDE selector's action at this root: expand the root first (the draft forward that
    yields the draft-side features, engine/drafters/delayed/taps.py), then argmax pi(a | x)."""
    draft.expand([0])
    K, L1, L2 = state.attached.choose(state)
    return {"K": K, "L1": L1, "L2": L2}
