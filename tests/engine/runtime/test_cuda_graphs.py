"""`engine: graphs` (engine/runtime/cuda_graphs.py): the padded forwards through one set of static
input buffers per graph key. On the CPU a replay re-runs the forward on those buffers (the data
flow of a CUDA-graph replay), or with `traced_graphs` replays a make_fx record of it, which
like a CUDA graph keeps the host values read at capture; the capture itself is checked on a
GPU (bench/gpu_exact.py)."""

from __future__ import annotations

import pytest
import torch

from bench.host_time import EagerOps
from engine.decode import generate
from engine.drafters import DRAFTERS
from engine.methods import standalone
from engine.runtime import cached_model
from engine.runtime.cuda_graphs import GraphedForward
from engine.runtime.eager import CachedModel
from engine.runtime.static import StaticCachedModel
from tests.engine.golden import PROMPTS, reference
from tests.engine.runtime.cache_helpers import tree_then_commit


@pytest.mark.parametrize("method", list(DRAFTERS))
def test_graphs_path_greedy_equals_autoregressive(tiny_pair, method):
    _greedy_equals_autoregressive(tiny_pair, method)


@pytest.mark.parametrize("method", list(DRAFTERS))
def test_traced_graphs_greedy_equals_autoregressive(llama_pair, method, traced_graphs):
    """Every graph replayed from its record: no method's graphed work reads or depends on a
    host value (dynatree's whole tree growth is one graph, engine/drafters/dynatree/plan.py). One
    prompt, with its truncated last iteration: tracing each graph key is most of the cost."""
    _greedy_equals_autoregressive(llama_pair, method, prompts=((PROMPTS[1], 37),))


def _greedy_equals_autoregressive(tiny_pair, method, prompts=((PROMPTS[0], 40), (PROMPTS[1], 37))):
    accepted = 0
    for prompt, n in prompts:  # 37: a truncated last iteration
        ids = tiny_pair.target.tokenizer.encode(prompt)
        got = generate(tiny_pair, ids, method, n, engine="graphs", params=standalone(method))
        assert tuple(got.tokens) == reference(tiny_pair, prompt, n), (method, prompt)
        accepted += sum(s.accepted for s in got.stats.iterations)
    assert method == "autoregressive" or accepted > 0


def test_a_traced_capture_keeps_host_values_and_refuses_host_reads(traced_graphs):
    scale = [2.0]
    graphed = GraphedForward(lambda x: x * scale[0], torch.device("cpu"))
    assert graphed(x=torch.ones(2)).tolist() == [2.0, 2.0]
    scale[0] = 3.0  # a host value read at capture stays in the record, as in a CUDA graph
    assert graphed(x=torch.full((2,), 2.0)).tolist() == [4.0, 4.0]
    reads = GraphedForward(lambda x: x * float(x.sum()), torch.device("cpu"))
    with pytest.raises(RuntimeError, match="tracing tensor"):
        reads(x=torch.ones(2))


def test_one_graph_per_shape_and_head_with_inputs_copied_into_its_buffers():
    calls = []

    def fn(x, top=0, argmax=False, outputs=((), False)):
        calls.append(x)
        return x * 2 + top + len(outputs[0])

    g = GraphedForward(fn, torch.device("cpu"))
    a, b = torch.tensor([1.0, 2.0]), torch.tensor([5.0, 7.0])
    assert torch.equal(g(x=a), a * 2) and torch.equal(g(x=b), b * 2)
    assert g.captures == 1 and calls[0] is calls[1]  # one static buffer, refilled per call
    assert calls[0] is not a and calls[0] is not b
    assert torch.equal(g(top=3, x=a), a * 2 + 3) and g.captures == 2  # another head
    g(x=torch.ones(4))  # another shape
    g(x=torch.ones(4, dtype=torch.float64))  # another dtype
    assert g.captures == 4 and len(g.graphs) == 4
    assert torch.equal(g(outputs=((1, 2), False), x=a), a * 2 + 2) and g.captures == 5  # extras
    g.clear()
    g(x=a)
    assert g.captures == 6 and len(g.graphs) == 1


@pytest.mark.parametrize("engine", ["fast", "graphs"])
def test_extras_come_back_unpadded_as_the_eager_forward_gives_them(tiny_pair, engine):
    """The NDE taps' logits and final hidden states (CachedModel.tap) and the block drafter's
    hidden rows (hidden_layers) of a padded graph forward: returned by the graph itself (a
    replayed CUDA graph runs no module hook), cut to the rows the eager forward returns."""
    model = tiny_pair.target.model
    prompt, tree = torch.arange(3, 10), torch.tensor([5, 6, 7])  # tree: a root and two children
    visible = torch.ones(3, 10, dtype=torch.bool)
    visible[1, 9] = visible[2, 8] = False
    positions = torch.tensor([7, 8, 8])
    got = []
    for lm in (CachedModel(model), StaticCachedModel(model, 64, engine)):
        lm.tap, lm.hidden_layers = True, (1, 2)
        lm.forward(prompt, torch.arange(7), keep=1)
        rows = [lm.tapped]
        lm.forward(tree, positions, visible, argmax=True)
        got.append((rows[0], lm.tapped, lm.hidden))
        lm.tap, lm.hidden_layers = False, ()
    (prefill, verify, hidden), (prefill_g, verify_g, hidden_g) = got
    assert prefill[0].shape == (1, model.config.vocab_size) and verify[1].shape == (3, 64)
    assert hidden.shape == (3, 2 * 64)
    for x, y in zip((*prefill, *verify, hidden), (*prefill_g, *verify_g, hidden_g)):
        torch.testing.assert_close(y, x, atol=1e-5, rtol=1e-4)


def test_graphs_tree_forward_and_compaction_match_the_dynamic_cache_across_growth(tiny_pair):
    """The eager reference against the graphs path whose buffer grows mid-way (the graphs of
    the old buffer are dropped and captured again)."""
    model = tiny_pair.target.model
    want = tree_then_commit(CachedModel(model))
    lm = StaticCachedModel(model, 4, engine="graphs")
    lm.cache.kv = lm._alloc(4)  # below MIN_CAPACITY: the tree forward grows it
    got = tree_then_commit(lm)
    for x, y in zip(got, want):
        torch.testing.assert_close(x, y, atol=1e-5, rtol=1e-4)
    assert lm.capacity >= 32 and len(lm._graph_call.graphs) >= 1
    assert lm._graph_call.captures > len(lm._graph_call.graphs)  # some dropped on growth


def test_graphs_and_compiled_are_separate_cached_models(tiny_pair):
    model = tiny_pair.draft.model
    g, f = cached_model(model, "graphs"), cached_model(model, "fast")
    assert g is not f and g.padded and not f.padded
    assert isinstance(g._graph_call, GraphedForward) and f._graph_call is None
    assert cached_model(model, "graphs") is g


@pytest.mark.parametrize("method", list(DRAFTERS))
def test_every_forward_of_a_graphs_generation_is_a_replay(llama_pair, method):
    """No model forward runs outside the graphs on `engine: graphs` with every method's
    defaults: no matrix product is launched outside a replay (bench/host_time.py EagerOps).
    DynaTree's N_max + 1 = 257 and DDTree's B + 1 = 257 verification rows once exceeded the
    graphs' largest size and ran eager, about 20 ms a forward on the H100 (docs/gpu.md)."""
    ids = llama_pair.target.tokenizer.encode(PROMPTS[0])
    with EagerOps() as ops:
        got = generate(llama_pair, ids, method, 24, engine="graphs", params=standalone(method))
    its = len(got.stats.iterations)
    assert ops.matmuls() == 0, (method, ops.counts.most_common(8))
    forwards = sum(it.draft_forwards for it in got.stats.iterations) + its + 1  # + prefill
    if DRAFTERS[method].plan is not None:  # the root's forward, the growth's graph, the target's
        forwards = 3 * its + 1
    assert ops.counts["replays"] >= forwards - 1  # the draft's prefill rides on its first step


def test_eager_ops_counts_uncaptured_forwards_and_replays(llama_pair):
    """The counter the test above relies on: the fast path's eager forwards show as matrix
    products and no replays; the graphs path's as replays, with a few device ops per step
    (the inputs copied into the graph's buffers, the mask, the output copied out)."""
    ids = llama_pair.target.tokenizer.encode(PROMPTS[0])
    counted = {}
    for engine in ("fast", "graphs"):
        with EagerOps() as ops:
            got = generate(llama_pair, ids, "autoregressive", 8, engine=engine)
        counted[engine] = ops
    steps = len(got.stats.iterations) + 1  # the prefill, then one forward per iteration
    assert counted["fast"].matmuls() > 0 and counted["fast"].counts["replays"] == 0
    assert counted["graphs"].matmuls() == 0 and counted["graphs"].counts["replays"] == steps
    assert counted["graphs"].ops() < counted["fast"].ops() / 5
