"""The i.i.d. (K, L) and delayed (K, L1, L2) tree builders (engine/drafters/iid.py, delayed.py):
structure, multiplicities, the draft law of their draws, configs and defaults."""

from __future__ import annotations

import pytest
import torch
from scipy.stats import chi2

from engine.config import ConfigError
from engine.draft import DecodeState, DraftModel
from engine.drafters import DRAFTERS
from engine.drafters.delayed.build import DelayedConfig
from engine.drafters.iid import IIDConfig
from engine.methods import resolve_method
from engine.sampling import Warp
from engine.verify.common import layout


def _build(pair, method, cfg, w=Warp(1.0), seed=0, remaining=100, committed=None, draft=None):
    draft = draft or DraftModel(pair.draft.model, w)
    committed = committed or pair.draft.tokenizer.encode("trees")
    gen = torch.Generator().manual_seed(seed)
    state = DecodeState(
        prefix_len=len(committed) - 1, root_token=committed[-1], warp=w, remaining=remaining
    )
    return DRAFTERS[method].build(draft.start(committed), state, cfg, gen), draft, committed


def _check_merged(tree):
    """Distinct sibling tokens; children's multiplicities sum to the parent's draws."""
    lay = layout(tree, distinct=True)
    assert tree.sampling == "iid" and tree.multiplicity is not None
    return lay


def test_iid_tree_structure(llama_pair):
    tree, _, _ = _build(llama_pair, "iid", IIDConfig(K=4, L=3), seed=1)
    lay = _check_merged(tree)
    assert int(tree.depth.max()) == 3
    for node in range(tree.size):
        kids = lay.kids[node]
        if int(tree.depth[node]) < 3:  # every rollout continues below every node it reaches
            draws = 4 if node == 0 else lay.mult[node]
            assert sum(lay.mult[c] for c in kids) == draws
            assert float(tree.q[node].sum()) == pytest.approx(1.0, abs=1e-5)
        else:
            assert not kids and float(tree.q[node].abs().sum()) == 0.0


def test_delayed_tree_structure(llama_pair):
    tree, _, _ = _build(llama_pair, "delayed", DelayedConfig(K=3, L1=2, L2=2), seed=2)
    lay = _check_merged(tree)
    assert int(tree.depth.max()) == 4
    trunk = [0]
    while int(tree.depth[trunk[-1]]) < 2:  # the single path: one child, one draw each
        (child,) = lay.kids[trunk[-1]]
        assert lay.mult[child] == 1
        trunk.append(child)
    assert sum(lay.mult[c] for c in lay.kids[trunk[-1]]) == 3  # K draws at the branching point
    assert DelayedConfig(K=3, L1=0, L2=2) and IIDConfig(K=3, L=2)  # L1 = 0 is the iid tree


def test_depth_is_capped_by_remaining_tokens(llama_pair):
    tree, _, _ = _build(llama_pair, "delayed", DelayedConfig(K=2, L1=3, L2=3), remaining=4)
    assert int(tree.depth.max()) == 4
    tree, _, _ = _build(llama_pair, "iid", IIDConfig(K=2, L=6), remaining=2)
    assert int(tree.depth.max()) == 2


def test_greedy_rollouts_coincide(llama_pair):
    tree, _, _ = _build(llama_pair, "iid", IIDConfig(K=3, L=4), w=Warp(0.0))
    assert tree.size == 5 and tree.multiplicity.tolist() == [1, 3, 3, 3, 3]


def test_iid_draws_follow_the_draft(llama_pair):
    """The first-level draws of many trees at one root follow the warped draft q (chi-square,
    level 1e-4, 400 trees x K = 4 draws, 8 bins of equal q mass)."""
    w = Warp(1.0, top_p=0.9)
    counts, draft = None, DraftModel(llama_pair.draft.model, w)
    for seed in range(400):  # the same root every time: draft.start() drops the last tree
        tree, _, _ = _build(llama_pair, "iid", IIDConfig(K=4, L=1), w=w, seed=seed, draft=draft)
        q = tree.q[0].double()
        if counts is None:
            order = q.argsort(descending=True)
            cum = q[order].cumsum(0) - q[order]
            bins = torch.empty_like(order)
            bins[order] = (cum * 8).long().clamp(max=7)
            counts = torch.zeros(8, dtype=torch.float64)
            expected = torch.zeros(8, dtype=torch.float64).index_add_(0, bins, q)
        lay = layout(tree)
        for c in lay.kids[0]:
            assert float(q[lay.tokens[c]]) > 0  # only tokens in the draft's top-p set
            counts[bins[lay.tokens[c]]] += lay.mult[c]
    expected = expected * counts.sum()
    stat = float(((counts - expected) ** 2 / expected).sum())
    assert chi2.sf(stat, 7) > 1e-4


def test_configs_and_default_verifiers():
    assert resolve_method("iid", {"K": "3", "L": "5"}, 1.0).verifier == "traversal"
    assert resolve_method("delayed", {}, 0.7).verifier == "specinfer"
    assert resolve_method("iid", {}, 0.0).verifier == "greedy"
    assert resolve_method("delayed", {"verifier": "khisti"}, 1.0).cfg == DelayedConfig()
    for method, bad in [
        ("iid", {"K": 0}),
        ("iid", {"L": -1}),
        ("delayed", {"L2": -2}),
        ("iid", {"k": 2}),
    ]:
        with pytest.raises(ConfigError):
            resolve_method(method, bad, 1.0)


def test_tree_multiplicity_is_validated():
    from engine.tree import Tree, make_tree

    tree = make_tree([5, 1, 2], [-1, 0, 0], sampling="iid", multiplicity=[1, 2, 1])
    assert tree.multiplicity.tolist() == [1, 2, 1]
    assert make_tree([5, 1], [-1, 0]).multiplicity is None
    with pytest.raises(ValueError, match="multiplicity"):
        Tree(
            tokens=tree.tokens,
            parents=tree.parents,
            depth=tree.depth,
            multiplicity=torch.ones(2, dtype=torch.long),
        )
    with pytest.raises(ValueError, match="same token"):  # merged i.i.d. siblings must differ
        layout(make_tree([5, 1, 1], [-1, 0, 0], sampling="iid"), distinct=True)
