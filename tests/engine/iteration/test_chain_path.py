"""The fast path's greedy linear iteration kept on the device (engine/iteration/chain.py): the same
tokens and the same per-iteration statistics as the general tree path, one host read per
iteration, and the tree builder's path wherever it does not apply."""

from __future__ import annotations

import pytest

from bench.host_time import HostReads
from engine.decode import generate
from engine.drafters import DRAFTERS
from engine.iteration import chain as chain_path
from engine.methods import resolve_method
from tests.engine.golden import PROMPTS, iteration_counters, reference


@pytest.mark.parametrize(
    "method,params",
    [
        ("linear", {"k": 1}),
        ("linear", {"k": 3}),
        ("linear", {"k": 6}),
        # greedy K rollouts of one node merge into one chain (engine/drafters/iid.py)
        ("iid", {"K": 3, "L": 4}),
        ("delayed", {"K": 2, "L1": 2, "L2": 3}),  # trunk, then K coinciding branches
        ("delayed", {"K": 4, "L1": 0, "L2": 2}),  # L1 = 0: the i.i.d. tree
    ],
)
def test_chain_equals_the_tree_path_iteration_for_iteration(tiny_pair, method, params, monkeypatch):
    for j, prompt in enumerate(PROMPTS):
        n = 64 if j != 1 else 37  # 37: the last iteration is truncated mid-chain
        ids = tiny_pair.target.tokenizer.encode(prompt)
        chain = generate(tiny_pair, ids, method, n, params=params, engine="fast")
        with monkeypatch.context() as m:
            m.setattr(chain_path, "applies", lambda *a: False)
            tree = generate(tiny_pair, ids, method, n, params=params, engine="fast")
        assert tuple(chain.tokens) == reference(tiny_pair, prompt, n)
        assert chain.tokens == tree.tokens
        assert iteration_counters(chain.stats) == iteration_counters(tree.stats)


@pytest.mark.parametrize(
    "method,params,length",
    [
        ("linear", {"k": 5}, 5),
        ("linear", {"k": 5, "stop_below": 0.4}, 0),  # each token's probability decides
        ("iid", {"K": 2, "L": 4}, 4),
        ("iid", {"K": 2, "L": 0}, 0),  # the root alone
        ("delayed", {"K": 2, "L1": 1, "L2": 3}, 4),
        ("dynatree", {}, 0),
    ],
)
def test_chain_length(method, params, length):
    m = resolve_method(method, params, 0.0)
    assert DRAFTERS[method].chain(m.cfg) == length


def test_one_host_read_per_iteration(llama_pair):
    ids = llama_pair.target.tokenizer.encode(PROMPTS[0])
    reads = HostReads()
    with reads:
        g = generate(llama_pair, ids, "linear", 48, params={"k": 4}, engine="fast")
    # one per iteration: the acceptance counts come from that read (none per generation)
    assert sum(reads.counts.values()) == len(g.stats.iterations), reads.counts


@pytest.mark.parametrize(
    "params,engine,temperature,draft_temperature",
    [
        ({"k": 4}, "eager", 0.0, None),  # the reference path stays the reference
        ({"k": 4, "stop_below": 0.4}, "fast", 0.0, None),  # needs each token's probability
        ({"k": 4}, "fast", 1.0, None),  # speculative sampling
        ({"k": 4}, "fast", 0.0, 1.0),  # sampled chain, greedy target
    ],
)
def test_the_tree_path_runs_where_the_chain_does_not_apply(
    llama_pair, monkeypatch, params, engine, temperature, draft_temperature
):
    def fail(*a, **kw):
        raise AssertionError("the chain iteration ran")

    monkeypatch.setattr(chain_path, "run", fail)
    ids = llama_pair.target.tokenizer.encode(PROMPTS[0])
    generate(
        llama_pair,
        ids,
        "linear",
        16,
        params=params,
        engine=engine,
        temperature=temperature,
        draft_temperature=draft_temperature,
    )
