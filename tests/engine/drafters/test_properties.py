"""Model-free property tests of the tree builders (PathFeed: the draft distribution is a fixed
function of the path), including each paper's own optimality / ordering invariant against brute
force on a tiny vocabulary."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.config import parse_config
from engine.draft import TreeBuilder
from engine.drafters import DRAFTERS, salf
from engine.drafters.beam import build as beam
from engine.drafters.ddtree import build as ddtree
from engine.drafters.sequoia import build as sequoia
from engine.drafters.sequoia.profile import measure_profile
from engine.drafters.specinfer import build as specinfer
from tests.engine.drafters.fakes import (
    PathFeed,
    all_prefixes,
    check_tree,
    fake_builder,
    path_prob,
    random_next_probs,
    state,
    tree_paths,
)
from tests.engine.drafters.property_helpers import FAST, PARAMS

GEN = torch.Generator().manual_seed(0)


@pytest.mark.parametrize("method", sorted(PARAMS))
@FAST
@given(
    data=st.data(),
    seed=st.integers(0, 10_000),
    vocab=st.integers(2, 7),
    remaining=st.integers(1, 8),
    temperature=st.sampled_from([0.0, 1.0]),
)
def test_budget_depth_topology(method, data, seed, vocab, remaining, temperature):
    """Every builder returns a topological tree within its budget, never deeper than the
    tokens still to emit; deterministic and without-replacement trees have distinct
    siblings."""
    params = data.draw(PARAMS[method])
    cls, build = DRAFTERS[method].config, DRAFTERS[method].build
    cfg = parse_config(cls, params)
    draft = fake_builder(random_next_probs(vocab, seed))
    tree = build(draft, state(remaining, temperature), cfg, torch.Generator().manual_seed(seed))
    budget_field = {
        "dynatree": "N_max",
        "dyspec": "budget",
        "salf": "N",
        "beam": "N",
        "ddtree": "B",
        "sequoia": "budget",
    }
    if method == "specinfer":
        budget = sum(math.prod(cfg.widths[: d + 1]) for d in range(len(cfg.widths)))
    else:
        budget = getattr(cfg, budget_field[method])
    check_tree(tree, budget, remaining)
    parents, tokens = tree.parents.tolist(), tree.tokens.tolist()
    siblings = [(parents[i], tokens[i]) for i in range(1, tree.size)]
    assert len(set(siblings)) == len(siblings)  # i.i.d. draws are merged (multiplicity)
    if temperature == 0.0:
        assert tree.sampling == "deterministic"


# ---------------------------------------------------------------- DDTree (Prop. 2-3)


class FixedMarginals:
    """A block drafter returning given marginals (no rollout chain)."""

    marginals: torch.Tensor = torch.empty(0)

    def __init__(self, draft) -> None:
        pass

    def block_marginals(self, state, block_size):
        return FixedMarginals.marginals[:block_size]


@FAST
@given(
    seed=st.integers(0, 10_000), vocab=st.integers(2, 4), L=st.integers(1, 4), B=st.integers(1, 60)
)
def test_ddtree_is_the_optimal_b_node_tree(seed, vocab, L, B):
    """The tree is the B most probable prefixes under the factorised surrogate (Prop. 2), found
    by brute force over all prefixes, and prefix-closed."""
    g = torch.Generator().manual_seed(seed)
    marginals = torch.softmax(2 * torch.randn(L, vocab, generator=g), -1)  # [L, V]
    draft = fake_builder(random_next_probs(vocab, seed))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(FixedMarginals, "marginals", marginals)
        mp.setitem(ddtree.BLOCK_DRAFTERS, "ar", FixedMarginals)
        tree = ddtree.build(draft, state(), ddtree.DDTreeConfig(B=B, L=L), GEN)
    check_tree(tree, B, L)

    def q(u):
        return math.prod(float(marginals[i, t]) for i, t in enumerate(u))

    got = sorted((q(u) for u in tree_paths(tree)), reverse=True)
    best = sorted((q(u) for u in all_prefixes(vocab, L)), reverse=True)[:B]
    assert len(got) == len(best)
    assert sum(got) == pytest.approx(sum(best), rel=1e-9)
    assert got == pytest.approx(best, rel=1e-9)


def test_ddtree_ar_adapter_reuses_the_greedy_chain():
    """The autoregressive adapter's marginals follow the draft's greedy chain, and the chain's
    nodes are the tree's rank-(1, .., 1) path (no duplicate root-to-leaf paths)."""
    nxt = random_next_probs(5, 3)
    feed = PathFeed(nxt)
    tree = ddtree.build(TreeBuilder(feed, 0), state(), ddtree.DDTreeConfig(B=12, L=4), GEN)
    paths = tree_paths(tree)
    assert len(set(paths)) == len(paths)
    chain = []
    for _ in range(4):
        chain.append(int(nxt(tuple(chain)).argmax()))
    assert tuple(chain[:1]) in paths
    assert len(feed.fed) == 4  # L one-token rollout forwards, nothing else


# ---------------------------------------------------------------- SALF / beam (App. B)


def top_n_paths(nxt, vocab: int, n: int, max_depth: int) -> list[float]:
    probs = sorted((path_prob(nxt, u) for u in all_prefixes(vocab, max_depth)), reverse=True)
    return probs[:n]


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 7), b=st.integers(1, 7))
def test_salf_th0_is_exhaustive_top_n(seed, n, b):
    """SALF with th = 0 (SpecExec's optimal search) returns the N most probable nodes of the
    whole tree (Theorems 2-3), for any batch size B <= N."""
    vocab, b = 3, min(b, n)
    nxt = random_next_probs(vocab, seed, sharpness=1.5)
    draft = fake_builder(nxt)
    tree = salf.build(draft, state(), salf.SALFConfig(N=n, B=b, th=0.0), GEN)
    check_tree(tree, n)
    got = sorted((path_prob(nxt, u) for u in tree_paths(tree)), reverse=True)
    assert got == pytest.approx(top_n_paths(nxt, vocab, n, n), rel=1e-6)


@FAST
@given(seed=st.integers(0, 10_000), n=st.integers(1, 30), th=st.sampled_from([0.05, 0.3, 0.6]))
def test_salf_threshold_stops_early_on_a_subset_of_the_optimum(seed, n, th):
    """A positive th only stops earlier: never more draft forwards than th = 0, never more
    nodes."""
    nxt = random_next_probs(4, seed)
    stopped, full = PathFeed(nxt), PathFeed(nxt)
    t1 = salf.build(TreeBuilder(stopped, 0), state(), salf.SALFConfig(N=n, B=min(3, n), th=th), GEN)
    t0 = salf.build(TreeBuilder(full, 0), state(), salf.SALFConfig(N=n, B=min(3, n), th=0.0), GEN)
    assert len(stopped.fed) <= len(full.fed) and t1.size <= t0.size


@FAST
@given(seed=st.integers(0, 10_000), n=st.integers(1, 30), depth=st.integers(1, 3))
def test_beam_exhaustive_beam_is_top_n(seed, n, depth):
    """With top_k >= V^(depth-1) the beam expands every node, so re-ranking returns the
    top-N prefixes of depth <= depth."""
    vocab = 3
    nxt = random_next_probs(vocab, seed)
    tree = beam.build(fake_builder(nxt), state(), beam.BeamConfig(N=n, top_k=9, depth=depth), GEN)
    check_tree(tree, n, depth)
    got = sorted((path_prob(nxt, u) for u in tree_paths(tree)), reverse=True)
    assert got == pytest.approx(top_n_paths(nxt, vocab, n, depth), rel=1e-6)


# ---------------------------------------------------------------- Sequoia (DP) / SpecInfer


def ordered_trees(n: int, depth: int):
    """All ordered trees with n nodes and depth <= depth, as BFS children-count tuples."""

    def forests(m: int, d: int):  # ordered forests of m nodes, each tree of depth <= d
        if m == 0:
            yield []
            return
        if d < 0:
            return
        for first in range(1, m + 1):
            for t in subtree(first, d):
                for rest in forests(m - first, d):
                    yield [t] + rest

    def subtree(m: int, d: int):  # nested (children list) trees of m nodes
        for kids in forests(m - 1, d - 1):
            yield kids

    def bfs(root):
        out, queue = [], [root]
        while queue:
            kids = queue.pop(0)
            out.append(len(kids))
            queue += kids
        return tuple(out)

    for t in subtree(n, depth):
        yield bfs(t)


@settings(max_examples=20, deadline=None)
@given(
    profile=st.lists(st.floats(0.0, 0.5), min_size=1, max_size=4).map(tuple),
    n=st.integers(1, 7),
    depth=st.integers(1, 4),
)
def test_sequoia_dp_is_optimal(profile, n, depth):
    """The dynamic program's shape has the largest F(T) among all trees of at most n drafted
    nodes and depth <= D (brute force over ordered trees)."""
    shape = sequoia.optimal_shape(profile, n, depth)
    assert sum(shape) <= n
    best = max(
        sequoia.expected_accepted(profile, s)
        for m in range(1, n + 2)
        for s in ordered_trees(m, depth)
        if max(s[:]) <= len(profile)
    )
    assert sequoia.expected_accepted(profile, shape) == pytest.approx(best, abs=1e-12)


def test_sequoia_and_specinfer_build_their_shapes():
    nxt = random_next_probs(6, 1)
    cfg = sequoia.SequoiaConfig(budget=20, max_depth=4, profile=(0.5, 0.2, 0.1))
    tree = sequoia.build(fake_builder(nxt), state(), cfg, GEN)
    shape = sequoia.optimal_shape(cfg.profile, 20, 4)
    order = sorted(range(tree.size), key=lambda i: (int(tree.depth[i]), i))  # BFS order
    assert tuple(len(tree.children(i)) for i in order) == shape
    tree = specinfer.build(
        fake_builder(nxt), state(remaining=2), specinfer.SpecInferConfig(expansion=(3, 2, 2)), GEN
    )
    assert tree.size == 1 + 3 + 6 and tree.sampling == "deterministic"
    tree = specinfer.build(
        fake_builder(nxt),
        state(temperature=1.0),
        specinfer.SpecInferConfig(k=3, depth=3),
        torch.Generator().manual_seed(0),
    )
    assert tree.size <= 1 + 3 + 9 + 27 and tree.sampling == "iid"
    mult, parents = tree.multiplicity.tolist(), tree.parents.tolist()
    for u in range(tree.size):  # a node of multiplicity m has m * k draws below it
        kids = [mult[i] for i in range(1, tree.size) if parents[i] == u]
        assert not kids or sum(kids) == 3 * mult[u]
    assert sum(mult[i] for i in range(1, tree.size) if int(tree.depth[i]) == 3) == 27


# ---------------------------------------------------------------- core: tree(keep=...)


def test_tree_keep_renumbers_nodes_and_slots():
    draft = fake_builder(random_next_probs(4, 0))
    a, b = draft.add_children(0, [1, 2])
    c = draft.add(a, 3)
    d = draft.add(b, 0)
    draft.expand([0, a, b])
    draft.expand([d])
    tree = draft.tree(keep=[0, b, d])
    assert tree.tokens.tolist() == [0, 2, 0] and tree.parents.tolist() == [-1, 0, 1]
    assert draft.numbering == [0, b, d]  # so DraftModel.commit finds d's cache slot
    assert tree.q is not None and bool((tree.q[2] > 0).all())
    with pytest.raises(ValueError):
        fake_builder(random_next_probs(4, 0)).tree(keep=[1])
    draft = fake_builder(random_next_probs(4, 0))
    a = draft.add(0, 1)
    c = draft.add(a, 2)
    with pytest.raises(ValueError):
        draft.tree(keep=[0, c])


def test_sequoia_measure_profile(llama_pair):
    """Greedy: p_k is the frequency of the target's token being the draft's k-th choice;
    sampling: a Monte Carlo of the verifier. Both are sub-probability vectors, and a draft equal
    to the target accepts its first draw (p_1 = 1 when greedy)."""
    prompts = [[256, 72, 105], [256, 65]]
    for t in (0.0, 1.0):
        prof = measure_profile(llama_pair, prompts, new_tokens=6, width=4, temperature=t, samples=4)
        assert len(prof) == 4 and all(0 <= x <= 1 for x in prof) and sum(prof) <= 1 + 1e-6
    same = type(llama_pair)(target=llama_pair.target, draft=llama_pair.target)
    assert measure_profile(same, prompts, new_tokens=6, width=3)[0] == 1.0
