"""Hybrid drafting: prompt-lookup candidates merged into a model-drafted tree under one node
budget (ours; the lookup side is engine/drafters/prompt_lookup.py, the model side SALF,
"salf_talf.txt" Alg. 2, or DynaTree, "dynatree.txt" Alg. 1).

One iteration:
1. The lookup trie (prompt_lookup.py `candidates` / `trie_paths`: `branches` continuations of
   at most `k` tokens, at most `lookup_budget` nodes) is computed from the committed tokens,
   without a forward; it takes s nodes.
2. The model tree (`base`) is grown with the draft LM under the remaining budget `N - s` (SALF's
   N, DynaTree's N_max; its other parameters at their paper defaults, SALF's batch B capped at
   that budget). With s = N the draft model does not run at all.
3. The lookup paths are merged into the model tree as a trie: where a lookup path starts with
   tokens the model tree already holds, those nodes are shared, so the tree has at most N
   drafted nodes (s lookup nodes at most, N - s model nodes at most).

The model side proposes what the draft LM believes; the lookup side proposes what the text
repeats (code identifiers, quoted passages in summarisation), which a small draft often
misses. Both sides choose children deterministically (top-k by probability; point masses
at the looked-up tokens), so the tree is "deterministic": greedy at temperature 0, NSS above
(see prompt_lookup.py for why the point-mass q admits no other verifier).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import torch

from engine.draft import DecodeState, TreeBuilder
from engine.drafters import salf
from engine.drafters.dynatree import build as dynatree
from engine.drafters.prompt_lookup import add_paths, candidates, trie_paths
from engine.drafters.record import Drafter
from engine.tree import DETERMINISTIC, Tree

# how this method draws siblings, at temperature 0 and above (engine/tree.py)
SAMPLING = DETERMINISTIC


@dataclass(frozen=True)
class LookupHybridConfig:
    base: Literal["salf", "dynatree"] = "salf"  # the model-drafted tree
    N: int = 16  # drafted nodes in the merged tree at most (the root is not counted)
    max_ngram: int = 3  # lookup: longest suffix matched
    min_ngram: int = 2  # lookup: shortest suffix matched
    k: int = 10  # lookup: tokens per continuation
    branches: int = 2  # lookup: continuations merged at most
    lookup_budget: int = 10  # lookup: nodes at most (<= N)

    def __post_init__(self) -> None:
        if not 1 <= self.min_ngram <= self.max_ngram:
            raise ValueError(
                f"need 1 <= min_ngram <= max_ngram, got {self.min_ngram}, {self.max_ngram}"
            )
        if min(self.k, self.branches, self.lookup_budget) < 1:
            raise ValueError("k, branches and lookup_budget must be >= 1")
        if not 1 <= self.lookup_budget <= self.N:
            raise ValueError(
                f"need 1 <= lookup_budget <= N, got lookup_budget={self.lookup_budget}, N={self.N}"
            )


def model_tree(
    draft: TreeBuilder, state: DecodeState, cfg: LookupHybridConfig, n: int, gen: torch.Generator
) -> None:
    """Grow the base method's tree with the draft LM under a budget of n drafted nodes; leaves
    the builder's kept nodes as its last tree() numbering."""
    if cfg.base == "salf":
        base = salf.SALFConfig(N=n, B=min(salf.SALFConfig.B, n))
        draft.tree(keep=salf.grow(draft, state, base))
    else:
        d = dynatree.DynaTreeConfig()
        dynatree.build(draft, state, replace(d, N_max=n), gen)


def build(
    draft: TreeBuilder, state: DecodeState, cfg: LookupHybridConfig, gen: torch.Generator
) -> Tree:
    k = min(cfg.k, state.remaining)
    paths = []
    if k >= 1 and len(state.context) >= 2:
        cands = candidates(state.context, cfg.max_ngram, cfg.min_ngram, k)
        paths = trie_paths(cands, cfg.branches, cfg.lookup_budget)
    used = len({p[:d] for p in paths for d in range(1, len(p) + 1)})  # lookup trie nodes
    kept = [0]
    if cfg.N - used >= 1 and state.remaining >= 1:
        model_tree(draft, state, cfg, cfg.N - used, gen)
        kept = list(draft.numbering)  # builder nodes of the model tree, root first
    shared = {(draft.parents[i], draft.tokens[i]): i for i in kept[1:]}
    first_new = draft.size
    add_paths(draft, paths, shared)
    keep = kept + list(range(first_new, draft.size))
    return draft.tree(SAMPLING.at(state.draft_warp.greedy), keep=keep)


DRAFTER = Drafter(
    name="lookup_hybrid",
    config=LookupHybridConfig,
    build=build,
    sampling=SAMPLING,
    default_verifier="nss",
    nodes=lambda c: c.N,
    budget="N",
)
