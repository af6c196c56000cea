"""Greedy trees of static shape grown on the device (engine/iteration/static_tree.py): the fixed tree
(engine/drafters/fixed_tree/plan.py), SpecInfer's expansion tree (engine/drafters/specinfer/plan.py), EAGLE-2's
beam tree (engine/drafters/beam/plan.py), Sequoia's (engine/drafters/sequoia/plan.py) and DDTree's
(engine/drafters/ddtree/plan.py). The same trees, node for node, as their Python builders
(engine/drafters/), the same tokens as autoregressive decoding, one host read per iteration,
and on `engine: graphs` the growth below the root replayed as one graph. DynaTree's step:
tests/engine/iteration/test_dynatree_static_path.py; DDTree's selection:
tests/engine/drafters/test_ddtree_plan.py."""

from __future__ import annotations

import pytest

from bench.host_time import EagerOps, HostReads
from engine.decode import generate
from engine.drafters.fixed_tree import plan as fixed_tree_step
from engine.iteration import static_tree
from engine.methods import standalone
from tests.engine.golden import PROMPTS, counters_except_padded, reference

CASES = [
    ("fixed_tree", {}),  # depth 4, branch 2, budget 32: 2 + 4 + 8 + 16 nodes
    ("fixed_tree", {"depth": 3, "branch": 3, "budget": 10}),  # the budget cuts level 2 (9 -> 7)
    ("fixed_tree", {"depth": 6, "branch": 2, "budget": 5}),  # the budget ends the tree at level 2
    ("fixed_tree", {"depth": 1, "branch": 4, "budget": 8}),  # the root's children: no level fed
    ("specinfer", {}),  # the 2-ary tree of depth 4
    ("specinfer", {"expansion": [4, 1, 1, 1, 1, 1, 1, 1]}),  # the cross-model sweep's
    ("specinfer", {"expansion": [1, 3, 2]}),
    ("beam", {}),  # N 60, top_k 10, depth 7: the re-ranking keeps 60 of 640 candidates
    ("beam", {"N": 12, "top_k": 3, "depth": 4}),  # deep candidates lose to shallow ones
    ("beam", {"N": 50, "top_k": 2, "depth": 3}),  # N above the pool (10): every candidate
    ("beam", {"N": 5, "top_k": 4, "depth": 1}),  # the root's children: no layer fed
    ("sequoia", {"profile": "fixed"}),  # budget 64 over the real pair's fixed profile
    ("sequoia", {"budget": 12, "max_depth": 3, "profile": [0.4, 0.3, 0.2]}),  # bushy, shallow
    ("sequoia", {"budget": 6, "max_depth": 8, "profile": [0.9]}),  # a chain
    ("ddtree", {}),  # B 256, L 16: a 15-node chain, 16 depths of 256 rows
    ("ddtree", {"B": 16, "L": 4}),
    ("ddtree", {"B": 48, "L": 8}),
    ("ddtree", {"B": 8, "L": 1}),  # the root's top B: no chain fed
]


def test_fixed_tree_widths_follow_the_python_builders_budget():
    cfg = fixed_tree_step.FixedTreeConfig
    assert fixed_tree_step.widths(cfg(), 4) == (2, 4, 8, 16)
    assert fixed_tree_step.widths(cfg(depth=3, branch=3, budget=10), 3) == (3, 7)
    assert fixed_tree_step.widths(cfg(depth=6, branch=2, budget=5), 6) == (2, 3)
    assert fixed_tree_step.widths(cfg(), 2) == (2, 4)  # the tokens left cut the depth


@pytest.mark.parametrize(("method", "params"), CASES)
def test_static_growth_equals_the_python_builder(tiny_pair, method, params, monkeypatch):
    for j, prompt in enumerate(PROMPTS):
        n = 40 if j != 1 else 29  # 29: the last iteration's tree is cut by the tokens left
        ids = tiny_pair.target.tokenizer.encode(prompt)
        python = generate(tiny_pair, ids, method, n, params=params, engine="fast")
        with monkeypatch.context() as m:
            m.setattr(static_tree, "static_device", lambda target: True)
            static = generate(tiny_pair, ids, method, n, params=params, engine="fast")
        assert tuple(static.tokens) == reference(tiny_pair, prompt, n)
        assert static.tokens == python.tokens
        assert counters_except_padded(static.stats) == counters_except_padded(python.stats)


@pytest.mark.parametrize(("method", "params"), [CASES[i] for i in (0, 1, 5, 8, 11, 12, 16)])
def test_graphed_growth_equals_the_python_builder(llama_pair, method, params, traced_graphs):
    """On `engine: graphs`, replayed from its make_fx record (which keeps any host value read
    at capture): the trees stay the Python builder's at every iteration. One prompt: the
    traced greedy test (test_cuda_graphs.py) replays the other."""
    for prompt in PROMPTS[:1]:
        ids = llama_pair.target.tokenizer.encode(prompt)
        python = generate(llama_pair, ids, method, 40, params=params, engine="fast")
        graphed = generate(llama_pair, ids, method, 40, params=params, engine="graphs")
        assert graphed.tokens == python.tokens
        assert counters_except_padded(graphed.stats) == counters_except_padded(python.stats)


@pytest.mark.parametrize("method", ["fixed_tree", "specinfer", "beam", "sequoia", "ddtree"])
def test_one_host_read_and_a_few_ops_per_iteration(llama_pair, method):
    """One read (the verification result) per iteration, where the Python builders read once
    per level, and a few device ops outside the graph replays (56-114 with the Python builders
    on `graphs`, bench/gpu_exact.py)."""
    ids = llama_pair.target.tokenizer.encode(PROMPTS[0])
    params = standalone(method)  # Sequoia alone: its fixed profile
    generate(llama_pair, ids, method, 32, engine="graphs", params=params)  # the captures
    with HostReads() as reads, EagerOps() as ops:
        g = generate(llama_pair, ids, method, 32, engine="graphs", params=params)
    its = len(g.stats.iterations)
    assert sum(reads.counts.values()) == its, reads.counts
    assert ops.matmuls() == 0
    assert ops.ops() / its < 40, ops.counts.most_common(8)
