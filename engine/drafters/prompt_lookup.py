"""Prompt lookup (n-gram) drafting: draft by copying what followed an earlier occurrence of the
last few committed tokens, with no draft model (Saxena 2023, "Prompt Lookup Decoding"; Hugging
Face assisted generation's `prompt_lookup_num_tokens` with `max_matching_ngram_size`; vLLM's
n-gram proposer with `prompt_lookup_min` / `prompt_lookup_max`).

Matching, over the committed tokens c[0..L-1] (prompt + generated, `DecodeState.context`; the
root is c[L-1]): for n from `max_ngram` down to `min_ngram`, an occurrence of the suffix
c[L-n:] at an earlier start i (c[i:i+n] == c[L-n:], i + n < L) proposes the tokens that
followed it, c[i+n], c[i+n+1], ... up to `k` of them. Where that continuation would run past
the end of the context (an occurrence overlapping the suffix, i.e. periodic text), it goes on
copying its own proposed tokens (ext = c + proposal, ext[i+n+j]), so a repeating pattern is
drafted k tokens deep instead of being cut short (ours; HF and vLLM cut the proposal at L).

- Linear (`lookup`, HF / vLLM): the longest n that occurs, and among its occurrences the most
  recent one (`match="latest"`, the default) or the first one (`match="first"`, HF's choice:
  it takes the first match in its `unfold` scan). Latest is the default because decoding is
  local: the most recent occurrence reflects the text as it is now (a name just changed in
  code being rewritten, the current iteration of a loop being generated), and in periodic text
  it is the occurrence closest to the root. One chain of at most k tokens.
- Tree (`lookup_tree`, ours): every occurrence of every n in [min_ngram, max_ngram] is a
  candidate continuation; equal continuations are one candidate, ranked by the longest n-gram
  that matched before it, then by how many occurrences propose it (frequency), then by recency.
  Candidates are merged in rank order into a trie (a shared prefix costs no node) until
  `branches` candidates are in or the node `budget` is spent (a candidate is cut when the
  budget runs out mid-way), so the tree's first branch is the linear proposal.

The tree is a deterministic function of the committed tokens: no draft forward runs (the
builder's `expand` is never called; the tree's q is None, `draft_forwards` is 0). Verifiers:
- greedy (temperature 0): exact, the target's argmax decides every node.
- nss (temperature > 0, the default): exact for any tree, deterministic ones included, and needs
  no q (engine/verify/nss.py): at each node Y ~ p, move into the child holding Y.
- The draft distribution of a lookup node is a point mass q = delta_x at its proposed token.
  Speculative sampling on a chain (naive, Leviathan et al.) then accepts x with probability
  min(1, p(x)/q(x)) = p(x) and otherwise draws from (p - q)_+ = p without x: exactly the law of
  NSS on that chain, so it adds nothing. The i.i.d. / without-replacement verifiers (naive_tree,
  spectr, specinfer, khisti, khisti_tournament, traversal, bv) assume siblings are draws
  from one q, which two distinct point-mass children are not, so the trees are declared
  "deterministic" and those verifiers are refused by engine/methods.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from engine.draft import DecodeState, TreeBuilder
from engine.drafters.record import Drafter
from engine.tree import DETERMINISTIC, Tree

# how this method draws siblings, at temperature 0 and above (engine/tree.py): a function of
# the committed tokens, at any temperature
SAMPLING = DETERMINISTIC


@dataclass(frozen=True)
class LookupConfig:
    """Linear prompt lookup: one chain (HF `prompt_lookup_num_tokens`)."""

    max_ngram: int = (
        3  # longest suffix matched (HF max_matching_ngram_size, vLLM prompt_lookup_max)
    )
    min_ngram: int = 2  # shortest suffix matched (vLLM prompt_lookup_min; HF: 1)
    k: int = 10  # tokens proposed per match (HF prompt_lookup_num_tokens)
    match: Literal["latest", "first"] = "latest"  # which occurrence of the longest n-gram

    def __post_init__(self) -> None:
        if not 1 <= self.min_ngram <= self.max_ngram:
            raise ValueError(
                f"need 1 <= min_ngram <= max_ngram, got {self.min_ngram}, {self.max_ngram}"
            )
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")


@dataclass(frozen=True)
class LookupTreeConfig:
    """Tree prompt lookup: several continuations merged into a trie under a node budget."""

    max_ngram: int = 3
    min_ngram: int = 1
    k: int = 10  # depth: tokens proposed per continuation
    branches: int = 4  # distinct continuations merged at most
    budget: int = 16  # drafted nodes at most (the root is not counted)

    def __post_init__(self) -> None:
        if not 1 <= self.min_ngram <= self.max_ngram:
            raise ValueError(
                f"need 1 <= min_ngram <= max_ngram, got {self.min_ngram}, {self.max_ngram}"
            )
        if self.k < 1 or self.branches < 1 or self.budget < 1:
            raise ValueError(
                f"k, branches and budget must be >= 1, got {self.k}, {self.branches}, {self.budget}"
            )


@dataclass(frozen=True)
class Candidate:
    """A proposed continuation and why it ranks where it does."""

    tokens: tuple[int, ...]  # the proposal, at most k tokens
    ngram: int  # longest n-gram that matched before it
    count: int  # occurrences (distinct continuation starts) proposing exactly these tokens
    start: int  # latest continuation start proposing it

    def rank(self) -> tuple[int, int, int]:
        return (self.ngram, self.count, self.start)


def continuation(context: Sequence[int], start: int, k: int) -> tuple[int, ...]:
    """k tokens from context[start], copying its own output past the end (periodic text)."""
    n = len(context)
    out: list[int] = list(context[start : start + k])
    while len(out) < k:  # start + j >= n: ext[start + j] with ext = context + out
        out.append(out[start + len(out) - n])
    return tuple(out)


def occurrences(context: torch.Tensor, n: int) -> list[int]:
    """Starts i (ascending) with context[i:i+n] == context[L-n:] and i + n < L."""
    length = context.shape[0]
    if length <= n:
        return []
    windows = context[: length - 1].unfold(0, n, 1)  # [L - n, n] all n-grams ending before L-1
    hits = (windows == context[length - n :]).all(dim=1)  # [L - n]
    return hits.nonzero().flatten().tolist()


def linear_proposal(context: Sequence[int], cfg: LookupConfig, k: int) -> tuple[int, ...]:
    """The chain of the longest matching n-gram's latest (or first) occurrence; () if none."""
    ctx = torch.as_tensor(context, dtype=torch.long)  # [L]
    for n in range(min(cfg.max_ngram, len(context) - 1), cfg.min_ngram - 1, -1):
        starts = occurrences(ctx, n)
        if starts:
            i = starts[-1] if cfg.match == "latest" else starts[0]
            return continuation(context, i + n, k)
    return ()


def candidates(context: Sequence[int], max_ngram: int, min_ngram: int, k: int) -> list[Candidate]:
    """Every distinct continuation of an occurrence of a suffix n-gram, best first."""
    ctx = torch.as_tensor(context, dtype=torch.long)  # [L]
    longest: dict[int, int] = {}  # continuation start -> longest n matching before it
    for n in range(min(max_ngram, len(context) - 1), min_ngram - 1, -1):
        for i in occurrences(ctx, n):
            longest.setdefault(i + n, n)
    merged: dict[tuple[int, ...], list[int]] = {}  # tokens -> [ngram, count, start]
    for start, n in longest.items():
        tokens = continuation(context, start, k)
        entry = merged.setdefault(tokens, [n, 0, start])
        entry[0], entry[1], entry[2] = max(entry[0], n), entry[1] + 1, max(entry[2], start)
    out = [Candidate(t, n, c, s) for t, (n, c, s) in merged.items()]
    return sorted(out, key=Candidate.rank, reverse=True)


def trie_paths(cands: list[Candidate], branches: int, budget: int) -> list[tuple[int, ...]]:
    """The candidates merged in rank order, at most `branches` of them and `budget` trie nodes
    (a candidate cut to the nodes left); returns the kept token paths, shared prefixes once."""
    nodes: set[tuple[int, ...]] = set()
    paths = []
    for cand in cands[:branches]:
        kept = 0
        for d in range(1, len(cand.tokens) + 1):
            prefix = cand.tokens[:d]
            if prefix not in nodes:
                if len(nodes) >= budget:
                    break
                nodes.add(prefix)
            kept = d
        if kept:
            paths.append(cand.tokens[:kept])
        if len(nodes) >= budget:
            break
    return paths


def add_paths(draft: TreeBuilder, paths: list[tuple[int, ...]], start: dict | None = None) -> None:
    """Add token paths below the root as a trie, reusing existing nodes: `start` maps
    (parent node, token) -> node for nodes already in the builder that may be shared."""
    child = dict(start or {})
    for path in paths:
        node = 0
        for token in path:
            nxt = child.get((node, token))
            if nxt is None:
                nxt = draft.add(node, token)
                child[(node, token)] = nxt
            node = nxt


def lookup_paths(state: DecodeState, cfg: LookupConfig | LookupTreeConfig) -> list[tuple[int, ...]]:
    """The token paths the config proposes from the committed tokens (depth <= remaining)."""
    k = min(cfg.k, state.remaining)
    if k < 1 or len(state.context) < 2:
        return []
    if isinstance(cfg, LookupConfig):
        chain = linear_proposal(state.context, cfg, k)
        return [chain] if chain else []
    cands = candidates(state.context, cfg.max_ngram, cfg.min_ngram, k)
    return trie_paths(cands, cfg.branches, cfg.budget)


def build(
    draft: TreeBuilder,
    state: DecodeState,
    cfg: LookupConfig | LookupTreeConfig,
    gen: torch.Generator,
) -> Tree:
    add_paths(draft, lookup_paths(state, cfg))
    return draft.tree(SAMPLING.at(state.draft_warp.greedy))


# prompt lookup: no draft forward; deterministic given the context, so NSS at T > 0
LOOKUP = Drafter(
    name="lookup",
    config=LookupConfig,
    build=build,
    sampling=SAMPLING,
    default_verifier="nss",
    nodes=lambda c: c.k,
    model_free=True,
)
LOOKUP_TREE = Drafter(
    name="lookup_tree",
    config=LookupTreeConfig,
    build=build,
    sampling=SAMPLING,
    default_verifier="nss",
    nodes=lambda c: min(c.budget, c.k * c.branches),
    budget="budget",
    model_free=True,
)
