"""DynaTree's tree builder (Algorithm 1) by hand and against a one-node-at-a-time reference, its
history adaptation and its sweep aliases; the model-free property tests of the other builders
are in test_properties.py."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from engine.config import ConfigError, parse_config
from engine.draft import TreeBuilder
from engine.drafters.dynatree import build as dynatree
from tests.engine.drafters.fakes import (
    PathFeed,
    fake_builder,
    random_next_probs,
    state,
    tree_paths,
)
from tests.engine.drafters.property_helpers import FAST, PARAMS

GEN = torch.Generator().manual_seed(0)

# ---------------------------------------------------------------- DynaTree (Alg. 1)

# A draft whose distributions are chosen by hand (vocabulary 0..4), keyed by the path of tokens
# below the committed root: () is the prefix x_1:t, (1,) is u0 = 1, (1, 0) its child 0, ...
HAND = {
    (): [0.05, 0.70, 0.12, 0.08, 0.05],
    (1,): [0.65, 0.05, 0.20, 0.05, 0.05],
    (1, 0): [0.02, 0.02, 0.06, 0.70, 0.20],
    (1, 2): [0.10, 0.28, 0.26, 0.20, 0.16],
    (1, 0, 3): [0.50, 0.40, 0.04, 0.03, 0.03],
}
HAND_CFG = dict(
    D0=2, D_max=3, B_min=1, B_mid=2, B_max=3, tau_h=0.8, tau_l=0.3,
    rho_stop=0.05, rho_deep=0.3, tau=0.03, history_adaptation=False,
)  # fmt: skip


def hand_feed():
    def next_probs(path):
        return torch.tensor(HAND.get(path, [0.2] * 5))

    return PathFeed(next_probs)


def test_dynatree_algorithm_1_by_hand():
    """Algorithm 1 (App. D) traced by hand on HAND with D0=2, D_max=3, B=(1,2,3),
    tau_h=0.8, tau_l=0.3, rho_stop=0.05, rho_deep=0.3, tau=0.03, N_max=64:

    l. 10  draft on the prefix: top-1 is token 1 -> root u0 = 1, p = 0.70, d = 0; A = [u0]
    pop u0: 0.70 >= tau, d 0 < D_max, >= rho_stop, d < D0 -> expand (l. 26):
           c = 0.65 -> B_mid = 2: a = 0 (p 0.455), b = 2 (p 0.14); A = [a, b]
    pop a:  d 1 < D0 -> expand: c = 0.70 -> B_mid: a1 = 3 (p 0.3185), a2 = 4 (p 0.091)
    pop b:  d 1 < D0 -> expand: c = 0.28 < tau_l -> B_max = 3:
           b1 = 1 (p 0.0392), b2 = 2 (p 0.0364), b3 = 3 (p 0.028 < tau, still added: l. 28)
    pop a1: d 2 >= D0 but p 0.3185 >= rho_deep -> deep expansion: c = 0.5 -> B_mid:
           a1a = 0 (p 0.159), a1b = 1 (p 0.127)
    pop a2: d 2 >= D0 and p 0.091 < rho_deep -> depth gating (l. 23), a leaf
    pop b1, b2: p >= tau but < rho_stop -> early stopping (l. 20), leaves
    pop b3: p 0.028 < tau -> pruned (l. 14): a leaf, kept in the tree
    pop a1a, a1b: d 3 >= D_max (l. 17), leaves
    BFS order (l. 3): u0, a, b, a1, a2, b1, b2, b3, a1a, a1b below the committed token.
    """
    cfg = dynatree.DynaTreeConfig(**HAND_CFG, N_max=64)
    feed = hand_feed()
    tree = dynatree.build(TreeBuilder(feed, root_token=7), state(), cfg, GEN)
    assert tree.tokens.tolist() == [7, 1, 0, 2, 3, 4, 1, 2, 3, 0, 1]
    assert tree.parents.tolist() == [-1, 0, 1, 1, 2, 2, 3, 3, 3, 4, 4]
    assert tree.depth.tolist() == [0, 1, 2, 2, 3, 3, 3, 3, 3, 4, 4]
    assert tree.sampling == "deterministic"
    # the draft ran on exactly the prefix, u0, a, b and a1 (l. 10 and l. 26)
    fed = sorted(tuple(p) for batch in feed.fed for p in map(feed_path(tree), batch))
    assert fed == sorted([(), (1,), (1, 0), (1, 2), (1, 0, 3)])


def feed_path(tree):
    """builder node -> token path (the builder numbers nodes as the tree, nothing is kept out)"""
    tokens = tree.tokens.tolist()
    return lambda i: tuple(tokens[j] for j in tree.path_to(i))


def test_dynatree_algorithm_1_budget_and_depth_by_hand():
    """N_max counts u0 (l. 12, |T| < N_max): with N_max = 5 the loop stops once a's children
    fill T = [u0, a, b, a1, a2]; with N_max = 1 the tree is u0 alone. With 1 token left to
    emit only u0 is drafted (a deeper node could not be committed)."""
    for n_max, tokens in [(5, [7, 1, 0, 2, 3, 4]), (1, [7, 1]), (3, [7, 1, 0, 2])]:
        cfg = dynatree.DynaTreeConfig(**HAND_CFG, N_max=n_max)
        tree = dynatree.build(TreeBuilder(hand_feed(), root_token=7), state(), cfg, GEN)
        assert tree.tokens.tolist() == tokens, n_max
    cfg = dynatree.DynaTreeConfig(**HAND_CFG, N_max=64)
    tree = dynatree.build(TreeBuilder(hand_feed(), root_token=7), state(remaining=1), cfg, GEN)
    assert tree.tokens.tolist() == [7, 1]
    tree = dynatree.build(TreeBuilder(hand_feed(), root_token=7), state(remaining=3), cfg, GEN)
    assert tree.depth.max() == 3 and tree.size == 9  # a1's children (depth 4) left out


def test_dynatree_ours_variant_by_hand():
    """variant ours on HAND: rooted at the committed token (p = 1, d = 0), whose c = 0.70 gives
    B_mid children 1 (0.70) and 2 (0.12); below-tau children are not added."""
    cfg = dynatree.DynaTreeConfig(**{**HAND_CFG, "D0": 1, "D_max": 2}, N_max=64, variant="ours")
    tree = dynatree.build(TreeBuilder(hand_feed(), root_token=7), state(), cfg, GEN)
    # 1 (0.70, d1 >= D0, >= rho_deep): c 0.65 -> B_mid: 0 (0.455), 2 (0.14)
    # 2 (0.12, d1 >= D0, < rho_deep): gated; depth 2 = D_max: leaves
    assert tree.tokens.tolist() == [7, 1, 2, 0, 2]
    assert tree.parents.tolist() == [-1, 0, 0, 1, 1]


def fifo_dynatree(nxt, cfg, remaining: int) -> list[tuple[int, ...]]:
    """Algorithm 1's loop popping one node at a time (either variant), to check that the
    level-batched builder grows the same tree in the same order."""
    paper = cfg.variant == "paper"
    max_depth = min(cfg.D_max if cfg.dynamic_depth else cfg.D0, remaining - paper)
    nodes, frontier = [], [((), 1.0)]
    if paper:
        q = nxt(())
        nodes.append((int(q.argmax()),))
        frontier = [(nodes[0], float(q.max()))]
    while frontier and len(nodes) < cfg.N_max:
        path, p = frontier.pop(0)
        d = len(path) - paper
        if p < cfg.tau or d >= max_depth:
            continue
        if cfg.dynamic_depth and (p < cfg.rho_stop or (d >= cfg.D0 and p < cfg.rho_deep)):
            continue
        q = nxt(path)
        top_p, top_t = q.topk(cfg.B_max)
        c = float(top_p[0])
        width = (
            (cfg.B_min if c >= cfg.tau_h else cfg.B_max if c < cfg.tau_l else cfg.B_mid)
            if cfg.dynamic_breadth
            else cfg.B_mid
        )
        for j in range(width):
            pc = p * float(top_p[j])
            if pc < cfg.tau and not paper:
                continue
            if len(nodes) >= cfg.N_max:
                break
            nodes.append(path + (int(top_t[j]),))
            frontier.append((nodes[-1], pc))
    return nodes


@FAST
@given(
    seed=st.integers(0, 10_000),
    data=st.data(),
    remaining=st.integers(1, 8),
    variant=st.sampled_from(["paper", "ours"]),
)
def test_dynatree_batched_equals_one_node_at_a_time(seed, data, remaining, variant):
    """The level-batched builder grows the same tree, in the same node order, as the
    one-node-at-a-time FIFO loop of Algorithm 1 (l. 12-29)."""
    params = data.draw(PARAMS["dynatree"])
    params.update(tau_l=0.2, tau_h=0.5, rho_deep=0.3, history_adaptation=False, variant=variant)
    cfg = parse_config(dynatree.DynaTreeConfig, params)
    nxt = random_next_probs(5, seed)
    tree = dynatree.build(fake_builder(nxt), state(remaining), cfg, GEN)
    assert tree_paths(tree) == fifo_dynatree(nxt, cfg, remaining)


def test_dynatree_history_adaptation_paper():
    """Sec. 3.3 / Alg. 1 l. 7 by hand, W = 2, accept_high 0.8, accept_low 0.6, step 0.05:
    a_r = accepted / drafted = (2/2, 2/2, 0/10, 1/10) = (1, 1, 0, 0.1).
    after r=1: a_bar = 1    -> aggressive:   D0 5 -> 6, tau_h 0.85, tau_l 0.35
    after r=2: a_bar = 0.5  -> conservative: D0 6 -> 5, tau_h 0.90, tau_l 0.40
    after r=3: a_bar = 0.05 -> conservative: D0 5 -> 4, tau_h 0.95, tau_l 0.45"""
    cfg = dynatree.DynaTreeConfig(W=2)
    acc, size = (2, 2, 0, 1), (2, 2, 10, 10)
    expect = [(5, 0.9, 0.4), (5, 0.9, 0.4), (6, 0.85, 0.35), (5, 0.9, 0.4), (4, 0.95, 0.45)]
    for t, (d0, th, tl) in enumerate(expect):
        got = dynatree.adapted(cfg, state(history=acc[:t], history_size=size[:t]))
        assert got == (d0, pytest.approx(th), pytest.approx(tl)), t
    # thresholds stop where they would leave (0, 1); D0 stays within [1, D_max - 1]
    cfg = dynatree.DynaTreeConfig(W=1, tau_h=0.92, tau_l=0.4, D0=6, D_max=7)
    got = dynatree.adapted(cfg, state(history=(0, 0, 0), history_size=(5, 5, 5)))
    assert got == (3, pytest.approx(0.97), pytest.approx(0.45))
    got = dynatree.adapted(cfg, state(history=(5, 5), history_size=(5, 5)))
    assert got == (6, pytest.approx(0.82), pytest.approx(0.3))
    off = dynatree.DynaTreeConfig(W=2, history_adaptation=False)
    assert dynatree.adapted(off, state(history=acc, history_size=size)) == (5, 0.9, 0.4)


def test_dynatree_history_adaptation_ours():
    cfg = dynatree.DynaTreeConfig(W=3, variant="ours")
    assert dynatree.adapted(cfg, state(history=(5, 5), history_depth=(5, 5))) == (5, 0.9, 0.4)
    d0, th, tl = dynatree.adapted(cfg, state(history=(0, 5, 5, 6), history_depth=(5, 5, 5, 6)))
    assert (d0, th, tl) == (6, pytest.approx(0.85), pytest.approx(0.35))
    d0, th, tl = dynatree.adapted(cfg, state(history=(1, 0, 1), history_depth=(5, 8, 5)))
    assert (d0, th, tl) == (4, pytest.approx(0.95), pytest.approx(0.45))


def test_dynatree_sweep_aliases_and_validation():
    cfg = parse_config(dynatree.DynaTreeConfig, {"depth": "8", "branch": "4", "threshold": "0.05"})
    assert (cfg.D0, cfg.B_mid, cfg.tau, cfg.D_max, cfg.B_max) == (8, 4, 0.05, 11, 5)
    assert (cfg.depth, cfg.branch, cfg.threshold) == (None, None, None)
    assert cfg == parse_config(dynatree.DynaTreeConfig, {"D0": 8, "B_mid": 4, "tau": 0.05})
    for bad in (
        {"depth": 4, "D0": 3},
        {"tau_l": 0.9, "tau_h": 0.4},
        {"D0": 5, "D_max": 5},
        {"rho_stop": 0.6},
        {"B_min": 3},
        {"N_max": 0},
        {"tau": 1.0},
    ):
        with pytest.raises(ConfigError):
            parse_config(dynatree.DynaTreeConfig, bad, where="method 'dynatree'")
