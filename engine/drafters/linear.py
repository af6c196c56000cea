"""Linear drafting: a chain of k draft tokens (Leviathan et al. 2023; Chen et al. 2023).

Greedy: each token is the draft's argmax. Sampling: each token is drawn from the warped draft
distribution q, so the chain is one i.i.d. rollout (sampling="iid") for speculative sampling.

Variant (ours, off by default): `stop_below` > 0 ends the chain early, after the first token
whose draft probability is below it (the draft's confidence in it), as Hugging Face assisted
generation's confidence criterion does (`assistant_confidence_threshold`, with up to
`num_assistant_tokens` = k tokens) and SpecDec++ motivates: a token the draft is unsure of is
likely rejected, and every token drafted after it is then wasted. The stopping rule depends
only on the draft's own tokens, so speculative sampling stays lossless over the chain it
drafted. On a CPU, where a draft forward costs a large share of a target forward
(../shared/MODELS.md), this is what lets long chains pay off.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from engine.config import ADDED_LATER
from engine.draft import DecodeState, TreeBuilder
from engine.drafters.record import Drafter
from engine.sampling import sample
from engine.tree import Tree, TreeSampling

# how this method draws siblings, at temperature 0 and above (engine/tree.py)
SAMPLING = TreeSampling(greedy="deterministic", sampled="iid")


@dataclass(frozen=True)
class LinearConfig:
    k: int = 4  # draft tokens per iteration at most (gamma in Leviathan et al.)
    # end the chain after a token the draft gives less than this (0: the paper's fixed k)
    stop_below: float = field(default=0.0, metadata=ADDED_LATER)

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")
        if not 0.0 <= self.stop_below <= 1.0:
            raise ValueError(f"stop_below must be in [0, 1], got {self.stop_below}")


def build(draft: TreeBuilder, state: DecodeState, cfg: LinearConfig, gen: torch.Generator) -> Tree:
    node = 0
    for _ in range(min(cfg.k, state.remaining)):
        if state.draft_warp.greedy:  # the draft's top token and its probability
            top_p, top_t = draft.expand_top([node], 1)  # [1, 1] twice
            token, p = int(top_t[0, 0]), top_p[0, 0]
        else:
            probs = draft.expand([node])[0]  # [V]
            token = int(sample(probs, gen))
            p = probs[token]
        node = draft.add(node, token)
        if cfg.stop_below > 0 and float(p) < cfg.stop_below:
            break
    return draft.tree(SAMPLING.at(state.draft_warp.greedy))


DRAFTER = Drafter(
    name="linear",
    config=LinearConfig,
    build=build,
    sampling=SAMPLING,
    default_verifier="naive",
    nodes=lambda c: c.k,
    chain=lambda c: c.k if c.stop_below == 0 else 0,  # stop_below ends the chain early
)
