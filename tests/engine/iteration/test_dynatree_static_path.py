"""Greedy DynaTree grown on the device with static shapes (engine/drafters/dynatree/plan.py): the same
trees, node for node, as the Python builder (engine/drafters/dynatree/build.py), the same tokens as
autoregressive decoding, and one host read per iteration."""

from __future__ import annotations

import pytest

from bench.host_time import EagerOps, HostReads
from engine.decode import generate
from engine.iteration import static_tree
from tests.engine.golden import DYNATREE_SMALL as S
from tests.engine.golden import PROMPTS, counters_except_padded, reference

# the tiny drafts are nearly uniform: thresholds this low grow trees of 3-41 nodes
CONFIGS = [
    {},  # the paper's Algorithm 1 at its defaults (2-node trees here)
    S,  # Algorithm 1, all three phases, Phase 3 replayed from the second iteration on
    {**S, "variant": "ours"},
    {**S, "variant": "ours", "threshold": 0.001, "branch": 2},  # children below tau dropped
    {**S, "N_max": 6},  # the budget cuts a level
    {**S, "threshold": 0.0, "rho_stop": 1e-9, "rho_deep": 1e-8, "N_max": 30},  # 31-node trees
    # the fixed-tree backbone (the paper's 450-config grid): depth 3, branch 3, 41 nodes
    {**S, "dynamic_breadth": False, "dynamic_depth": False, "history_adaptation": False},
]


@pytest.mark.parametrize("params", CONFIGS)
def test_static_growth_equals_the_python_builder(tiny_pair, params, monkeypatch):
    for j, prompt in enumerate(PROMPTS):
        n = 48 if j != 1 else 29  # 29: the last iteration's tree is cut by the tokens left
        ids = tiny_pair.target.tokenizer.encode(prompt)
        python = generate(tiny_pair, ids, "dynatree", n, params=params, engine="fast")
        with monkeypatch.context() as m:
            m.setattr(static_tree, "static_device", lambda target: True)
            static = generate(tiny_pair, ids, "dynatree", n, params=params, engine="fast")
        assert tuple(static.tokens) == reference(tiny_pair, prompt, n)
        assert static.tokens == python.tokens
        assert counters_except_padded(static.stats) == counters_except_padded(python.stats)


@pytest.mark.parametrize("params", [CONFIGS[1], CONFIGS[-1]])
def test_graphed_growth_equals_the_python_builder(llama_pair, params, traced_graphs):
    """On `engine: graphs` the whole growth below the root (every level's draft forward and the
    tree building between them) is one graph per setting, replayed here from its make_fx
    record, which keeps any host value it read at capture: the trees, node for node, must
    still be the Python builder's at every iteration, not only the output. One prompt: the
    traced greedy test (test_cuda_graphs.py) replays the other."""
    for prompt in PROMPTS[:1]:
        ids = llama_pair.target.tokenizer.encode(prompt)
        python = generate(llama_pair, ids, "dynatree", 40, params=params, engine="fast")
        graphed = generate(llama_pair, ids, "dynatree", 40, params=params, engine="graphs")
        assert graphed.tokens == python.tokens
        assert counters_except_padded(graphed.stats) == counters_except_padded(python.stats)


def test_graphed_growth_launches_a_few_ops_per_iteration(llama_pair):
    """Outside the graphs an iteration launches the root's and the target's input copies, the
    verification mask and the read: 24 device ops per iteration here, where the levels' tree
    building between graph replays launched 359 (bench/gpu_exact.py, docs/gpu.md)."""
    ids = llama_pair.target.tokenizer.encode(PROMPTS[0])
    generate(llama_pair, ids, "dynatree", 32, engine="graphs")  # the captures
    with EagerOps() as ops:
        g = generate(llama_pair, ids, "dynatree", 32, engine="graphs")
    assert ops.matmuls() == 0
    assert ops.ops() / len(g.stats.iterations) < 40, ops.counts.most_common(8)


def test_one_host_read_per_iteration(llama_pair, monkeypatch):
    monkeypatch.setattr(static_tree, "static_device", lambda target: True)
    ids = llama_pair.target.tokenizer.encode(PROMPTS[0])
    reads = HostReads()
    with reads:
        g = generate(llama_pair, ids, "dynatree", 48, params={"tau": 0.0}, engine="fast")
    # one per iteration: the acceptance counts come from that read (none per generation)
    assert sum(reads.counts.values()) == len(g.stats.iterations), reads.counts


def test_the_python_builder_runs_on_the_cpu_fast_path(llama_pair, monkeypatch):
    def fail(*a, **kw):
        raise AssertionError("the static step ran")

    monkeypatch.setattr(static_tree, "run", fail)
    ids = llama_pair.target.tokenizer.encode(PROMPTS[0])
    generate(llama_pair, ids, "dynatree", 16, engine="fast")
    generate(llama_pair, ids, "dynatree", 16, engine="fast", temperature=1.0)
