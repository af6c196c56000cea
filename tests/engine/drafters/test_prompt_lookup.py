"""Prompt lookup (engine/drafters/prompt_lookup.py) and the hybrid (lookup_hybrid.py), model
free: matching, ranking, trie merging, budgets, and that no draft forward ever runs."""

from __future__ import annotations

import pytest
import torch

from engine.config import ConfigError
from engine.draft import DecodeState, TreeBuilder
from engine.drafters import lookup_hybrid, prompt_lookup
from engine.drafters.lookup_hybrid import LookupHybridConfig
from engine.drafters.prompt_lookup import (
    Candidate,
    LookupConfig,
    LookupTreeConfig,
    candidates,
    continuation,
    linear_proposal,
    occurrences,
    trie_paths,
)
from engine.methods import compatible_verifiers, resolve_method
from engine.sampling import Warp
from tests.engine.drafters.fakes import fake_builder, random_next_probs


def no_forward(builder, new):
    raise AssertionError("prompt lookup must not run the draft model")


def lookup_state(context, remaining=1000, temperature=0.0) -> DecodeState:
    return DecodeState(
        prefix_len=len(context) - 1,
        root_token=context[-1],
        warp=Warp(temperature),
        remaining=remaining,
        context=list(context),
    )


def build(context, cfg, remaining=1000):
    b = TreeBuilder(no_forward, context[-1])
    tree = prompt_lookup.build(b, lookup_state(context, remaining), cfg, torch.Generator())
    return tree, b


def paths_of(tree) -> set[tuple[int, ...]]:
    """Token paths root -> each leaf."""
    tokens, kids = tree.tokens.tolist(), {}
    for i, p in enumerate(tree.parents.tolist()):
        kids.setdefault(p, []).append(i)
    return {tuple(tokens[j] for j in tree.path_to(i)) for i in range(1, tree.size) if i not in kids}


def test_occurrences_exclude_the_suffix_itself():
    ctx = torch.tensor([5, 6, 7, 5, 6])
    assert occurrences(ctx, 2) == [0]
    assert occurrences(ctx, 1) == [1]  # the 6 at index 1; index 4 is the suffix itself
    assert occurrences(ctx, 3) == []
    assert occurrences(torch.tensor([5]), 1) == []


def test_longest_ngram_wins_over_a_more_recent_shorter_match():
    # suffix (1, 2, 3): the trigram occurs at 0 (-> 40, 41); the bigram (2, 3) also at 6 (-> 9)
    ctx = [1, 2, 3, 40, 41, 50, 2, 3, 9, 8, 1, 2, 3]
    assert linear_proposal(ctx, LookupConfig(max_ngram=3, min_ngram=1, k=2), 2) == (40, 41)
    assert linear_proposal(ctx, LookupConfig(max_ngram=2, min_ngram=1, k=2), 2) == (9, 8)


@pytest.mark.parametrize("match,want", [("latest", (30, 31)), ("first", (20, 21))])
def test_latest_or_first_occurrence(match, want):
    ctx = [7, 8, 20, 21, 0, 7, 8, 30, 31, 0, 7, 8]
    cfg = LookupConfig(max_ngram=2, min_ngram=2, k=2, match=match)
    assert linear_proposal(ctx, cfg, 2) == want


def test_min_ngram_refuses_shorter_matches():
    ctx = [1, 2, 3, 9, 5, 3]  # only the unigram (3) recurs
    assert linear_proposal(ctx, LookupConfig(min_ngram=2), 10) == ()
    assert linear_proposal(ctx, LookupConfig(min_ngram=1, k=3), 3) == (9, 5, 3)


def test_periodic_text_continues_past_the_end_of_the_context():
    ctx = [4, 1, 2, 1, 2, 1, 2]  # suffix (1, 2) latest at 3 -> context ends after 1 token
    assert continuation(ctx, 5, 5) == (1, 2, 1, 2, 1)
    assert linear_proposal(ctx, LookupConfig(max_ngram=2, k=5), 5) == (1, 2, 1, 2, 1)
    assert continuation(ctx, 2, 3) == (2, 1, 2)  # inside the context: a plain slice


def test_candidates_rank_by_ngram_then_frequency_then_recency():
    # suffix (5, 6): bigram occurrences -> 1 (x2) and 2 (x1); unigram-only (6) occurrence -> 3
    ctx = [5, 6, 2, 0, 5, 6, 1, 0, 9, 6, 3, 0, 5, 6, 1, 0, 5, 6]
    got = candidates(ctx, max_ngram=2, min_ngram=1, k=2)
    assert [c.tokens for c in got] == [(1, 0), (2, 0), (3, 0)]
    assert [(c.ngram, c.count) for c in got] == [(2, 2), (2, 1), (1, 1)]
    assert got[0].start == 14  # the latest start proposing (1, 0)
    # equal n-gram and count: the most recent first
    ctx2 = [5, 6, 2, 0, 5, 6, 1, 0, 5, 6]
    assert [c.tokens for c in candidates(ctx2, 2, 2, 2)] == [(1, 0), (2, 0)]


def test_trie_merges_shared_prefixes_and_respects_branches_and_budget():
    cands = [Candidate((1, 2, 3), 2, 1, 0), Candidate((1, 2, 4), 2, 1, 0)]
    cands += [Candidate((5, 6), 1, 1, 0)]
    assert trie_paths(cands, branches=3, budget=10) == [(1, 2, 3), (1, 2, 4), (5, 6)]
    # (1, 2, 4) costs one node only; the third candidate is cut at the budget
    assert trie_paths(cands, branches=3, budget=5) == [(1, 2, 3), (1, 2, 4), (5,)]
    assert trie_paths(cands, branches=2, budget=10) == [(1, 2, 3), (1, 2, 4)]
    assert trie_paths(cands, branches=3, budget=2) == [(1, 2)]


def test_tree_build_adds_nodes_without_a_forward_and_without_q():
    ctx = [5, 6, 2, 0, 5, 6, 1, 0, 9, 6, 3, 0, 5, 6, 1, 0, 5, 6]
    tree, b = build(ctx, LookupTreeConfig(max_ngram=2, min_ngram=1, k=2, branches=3, budget=8))
    assert tree.q is None and tree.sampling == "deterministic" and b._batches == []
    assert paths_of(tree) == {(1, 0), (2, 0), (3, 0)}
    assert tree.tokens[0] == 6 and tree.size == 7  # root + 3 branches of 2


def test_linear_build_is_one_chain_capped_by_remaining():
    ctx = [1, 2, 3, 4, 5, 6, 7, 1, 2]
    tree, _ = build(ctx, LookupConfig(k=10), remaining=3)
    assert paths_of(tree) == {(3, 4, 5)}
    assert tree.parents.tolist() == [-1, 0, 1, 2]
    tree, _ = build([1, 2, 3], LookupConfig())  # nothing recurs: a root-only tree
    assert tree.size == 1


def test_tree_stays_within_budget_on_random_contexts():
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        ctx = torch.randint(0, 4, (60,), generator=g).tolist()
        cfg = LookupTreeConfig(max_ngram=3, min_ngram=1, k=6, branches=5, budget=12)
        tree, _ = build(ctx, cfg)
        assert 1 < tree.size <= 13 and int(tree.depth.max()) <= 6
        siblings = {}
        for i, (p, t) in enumerate(zip(tree.parents.tolist(), tree.tokens.tolist())):
            assert (p, t) not in siblings or i == 0, "duplicate sibling token"
            siblings[(p, t)] = i
        # the first branch is the best-ranked candidate (the tree's linear proposal)
        best = candidates(ctx, 3, 1, 6)[0].tokens
        assert any(path[: len(best)] == best for path in paths_of(tree)) or len(best) > 12


def test_hybrid_merges_lookup_into_the_model_tree_under_one_budget():
    ctx = [9, 1, 2, 3, 4, 5, 6, 0, 1, 2]  # lookup proposes 3, 4, 5, ...
    next_probs = random_next_probs(10, seed=3)
    for base in ("salf", "dynatree"):
        cfg = LookupHybridConfig(base=base, N=12, k=4, lookup_budget=4)
        b = fake_builder(next_probs, root_token=2)
        tree = lookup_hybrid.build(b, lookup_state(ctx), cfg, torch.Generator())
        assert tree.size - 1 <= 12
        assert (3, 4, 5, 6) in {p[:4] for p in paths_of(tree)}, base
        assert len(b.feed.fed) > 0  # the model side ran
        model_nodes = {i for batch in b.feed.fed for i in batch}
        assert len(model_nodes) > 1, base  # and contributed nodes beside the root
        keys = [(p, t) for p, t in zip(tree.parents.tolist(), tree.tokens.tolist())]
        assert len(set(keys)) == len(keys), "a lookup path duplicated a model node"


def test_hybrid_shares_a_prefix_the_model_already_drafted():
    ctx = [9, 1, 2, 7, 7, 0, 1, 2]  # lookup proposes (7, 7, 0)

    def next_probs(path):
        probs = torch.full((10,), 0.01)
        probs[7] = 0.91  # the draft is sure of 7 everywhere
        return probs

    cfg = LookupHybridConfig(base="salf", N=6, k=3, lookup_budget=3, min_ngram=2)
    b = fake_builder(next_probs, root_token=2)
    tree = lookup_hybrid.build(b, lookup_state(ctx), cfg, torch.Generator())
    assert tree.size - 1 <= 6
    children_of_root = [t for p, t in zip(tree.parents.tolist(), tree.tokens.tolist()) if p == 0]
    assert children_of_root.count(7) == 1  # the lookup's 7 is the model's 7


def test_hybrid_with_lookup_filling_the_budget_runs_no_forward():
    ctx = [1, 2, 3, 4, 5, 6, 7, 1, 2]
    cfg = LookupHybridConfig(N=4, k=4, lookup_budget=4, branches=1)
    b = fake_builder(random_next_probs(10), root_token=2)
    tree = lookup_hybrid.build(b, lookup_state(ctx), cfg, torch.Generator())
    assert b.feed.fed == [] and paths_of(tree) == {(3, 4, 5, 6)}


def test_configs_and_verifier_pairing():
    with pytest.raises(ConfigError):
        resolve_method("lookup", {"min_ngram": 4, "max_ngram": 3})
    with pytest.raises(ConfigError):
        resolve_method("lookup_tree", {"budget": 0})
    with pytest.raises(ConfigError):
        resolve_method("lookup_hybrid", {"N": 4, "lookup_budget": 5})
    with pytest.raises(ConfigError):
        resolve_method("lookup", {"match": "middle"})
    for m in ("lookup", "lookup_tree", "lookup_hybrid"):
        assert compatible_verifiers(m, 0.0) == ["greedy", "nss"]
        assert compatible_verifiers(m, 1.0) == ["nss"]
        assert resolve_method(m, temperature=0.7).verifier == "nss"
        with pytest.raises(ConfigError, match="not lossless"):
            resolve_method(m, {"verifier": "specinfer"}, temperature=0.7)
