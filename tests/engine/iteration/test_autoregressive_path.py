"""The fast path's greedy autoregressive iteration (engine/iteration/autoregressive.py): the same tokens and
per-iteration statistics as the general path's root-only tree, one host read per iteration,
and the general path wherever it does not apply."""

from __future__ import annotations

import dataclasses

import pytest

from bench.host_time import HostReads
from engine.decode import generate
from engine.drafters import DRAFTERS
from engine.iteration import autoregressive
from tests.engine.golden import PROMPTS, iteration_counters, reference


def test_autoregressive_path_equals_the_tree_path_iteration_for_iteration(tiny_pair, monkeypatch):
    for prompt in PROMPTS:
        ids = tiny_pair.target.tokenizer.encode(prompt)
        fast = generate(tiny_pair, ids, "autoregressive", 24, engine="fast")
        with monkeypatch.context() as m:
            m.setattr(autoregressive, "applies", lambda *a: False)
            tree = generate(tiny_pair, ids, "autoregressive", 24, engine="fast")
        assert tuple(fast.tokens) == reference(tiny_pair, prompt, 24) == tuple(tree.tokens)
        assert iteration_counters(fast.stats) == iteration_counters(tree.stats)


def counting_builds(monkeypatch) -> list:
    """Every call of the autoregressive drafter's build (the root-only tree), recorded."""
    calls, drafter = [], DRAFTERS["autoregressive"]

    def build(*a, **kw):
        calls.append(1)
        return drafter.build(*a, **kw)

    monkeypatch.setitem(DRAFTERS, "autoregressive", dataclasses.replace(drafter, build=build))
    return calls


def test_one_host_read_and_no_tree_per_iteration(llama_pair, monkeypatch):
    calls = counting_builds(monkeypatch)
    ids = llama_pair.target.tokenizer.encode(PROMPTS[0])
    with HostReads() as reads:
        g = generate(llama_pair, ids, "autoregressive", 32, engine="fast")
    # one per iteration (no drafted node, so no acceptance counts to read per generation)
    assert sum(reads.counts.values()) == len(g.stats.iterations) == 32, reads.counts
    assert calls == []


@pytest.mark.parametrize("engine,temperature", [("eager", 0.0), ("fast", 1.0)])
def test_the_general_path_runs_where_the_autoregressive_path_does_not_apply(
    llama_pair, monkeypatch, engine, temperature
):
    calls = counting_builds(monkeypatch)
    ids = llama_pair.target.tokenizer.encode(PROMPTS[0])
    g = generate(llama_pair, ids, "autoregressive", 8, temperature, engine=engine)
    assert len(calls) == len(g.stats.iterations) == 8
