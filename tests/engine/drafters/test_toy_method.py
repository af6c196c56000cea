"""A method added the way docs/architecture.md says (tests/engine/drafters/toy: build.py, plan.py,
its record; one entry in DRAFTERS) runs everywhere a method runs: resolved and bounded before
any model loads, decoded greedy-exact on both tiny families by its host builder (general
iteration) and by its device plan (static-tree iteration, graphed on `engine: graphs`)."""

from __future__ import annotations

import pytest

from engine import drafters
from engine.config import ConfigError
from engine.decode import generate
from engine.iteration import static_tree
from engine.methods import resolve_method
from engine.tree_bounds import check_vocab, max_nodes
from tests.engine.drafters.toy import DRAFTER as TOY
from tests.engine.golden import PROMPTS, reference


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(drafters.DRAFTERS, TOY.name, TOY)
    return TOY.name


def test_resolved_and_bounded_before_any_model_loads(toy):
    m = resolve_method(toy, {"k": "3", "depth": "2"}, 0.0)
    assert (m.cfg.k, m.cfg.depth, m.verifier) == (3, 2, "greedy")
    assert resolve_method(toy, {}, 1.0).verifier == "nss"
    assert max_nodes(m) == 3 + 9
    with pytest.raises(ConfigError, match="k=300"):
        check_vocab(resolve_method(toy, {"k": 300}, 0.0), 0.0, 260, "tiny-llama")
    with pytest.raises(ConfigError, match="need k >= 1"):
        resolve_method(toy, {"k": 0}, 0.0)


@pytest.mark.parametrize("params", [{}, {"k": 3, "depth": 3}])
def test_greedy_exact_by_builder_and_by_device_plan(tiny_pair, toy, params, monkeypatch):
    grown = []
    run = static_tree.run
    monkeypatch.setattr(static_tree, "run", lambda *a: grown.append(1) or run(*a))
    for j, prompt in enumerate(PROMPTS):
        n = 32 if j != 1 else 21  # 21: the last iteration's tree is cut by the tokens left
        ids = tiny_pair.target.tokenizer.encode(prompt)
        ref = reference(tiny_pair, prompt, n)
        host = generate(tiny_pair, ids, toy, n, params=params, engine="fast")
        assert tuple(host.tokens) == ref and not grown  # the host builder: no padded path
        with monkeypatch.context() as m:
            m.setattr(static_tree, "static_device", lambda target: True)
            device = generate(tiny_pair, ids, toy, n, params=params, engine="fast")
        assert tuple(device.tokens) == ref and len(grown) == len(device.stats.iterations)
        grown.clear()
        assert [it.accepted for it in device.stats.iterations] == [
            it.accepted for it in host.stats.iterations
        ]


def test_graphed_device_plan_is_greedy_exact(llama_pair, toy, traced_graphs):
    ids = llama_pair.target.tokenizer.encode(PROMPTS[0])
    g = generate(llama_pair, ids, toy, 24, params={"k": 2, "depth": 3}, engine="graphs")
    assert tuple(g.tokens) == reference(llama_pair, PROMPTS[0], 24)


def test_sampling_runs_the_host_builder_with_nss(tiny_pair, toy):
    ids = tiny_pair.target.tokenizer.encode(PROMPTS[0])
    g = generate(tiny_pair, ids, toy, 16, temperature=1.0, seed=1, engine="fast")
    assert len(g.tokens) == 16
