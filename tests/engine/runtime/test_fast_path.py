"""The fast path (engine/runtime/static.py): the same tokens as the eager reference for every
method on both tiny families, and a preallocated cache that behaves like the DynamicCache."""

from __future__ import annotations

import pytest
import torch

from engine.config import ConfigError
from engine.decode import generate
from engine.draft import DraftModel
from engine.drafters import DRAFTERS
from engine.methods import standalone
from engine.runtime import cached_model
from engine.runtime.eager import CachedModel
from engine.runtime.static import StaticCachedModel, bucket
from engine.sampling import Warp
from tests.engine.golden import COUNTED, METHODS, PROMPTS, reference
from tests.engine.runtime.cache_helpers import PARENTS, PROMPT, TOKENS, tree_then_commit

# every registered method with its defaults, plus the stress variants of the greedy golden test
CASES = [(m, standalone(m)) for m in DRAFTERS]
CASES += [(m, p) for m, sets in METHODS.items() for p in sets[1:]]


@pytest.mark.parametrize("method,params", CASES, ids=[f"{m}-{i}" for i, (m, _) in enumerate(CASES)])
def test_fast_path_greedy_equals_autoregressive(tiny_pair, method, params):
    accepted = 0
    for k, prompt in enumerate(PROMPTS):
        n = 64 if k != 1 else 37  # 37: the last iteration is truncated mid-tree
        ids = tiny_pair.target.tokenizer.encode(prompt)
        got = generate(tiny_pair, ids, method, n, params=params, engine="fast")
        assert tuple(got.tokens) == reference(tiny_pair, prompt, n), (method, params, prompt)
        accepted += sum(s.accepted for s in got.stats.iterations)
    assert method == "autoregressive" or accepted > 0


@pytest.mark.parametrize("method", ["linear", "dynatree", "dyspec", "salf", "ddtree", "fixed_tree"])
def test_fast_path_iterations_count_as_the_eager_ones(tiny_pair, method):
    """Per iteration the same tree sizes, acceptance and acceptance counts on both paths: the
    fast path takes the counts from its one verification read (engine/decode.py host_counts,
    engine/iteration/chain.py), the eager one from tensors (acceptance_counts)."""
    ids = tiny_pair.target.tokenizer.encode(PROMPTS[0])
    stats = {
        e: [
            {k: getattr(it, k) for k in COUNTED}
            for it in generate(tiny_pair, ids, method, 40, engine=e).stats.iterations
        ]
        for e in ("eager", "fast")
    }
    assert stats["fast"] == stats["eager"]
    assert sum(it["top_match"] for it in stats["fast"]) > 0


@pytest.mark.parametrize("capacity", [4, 256])  # 4: the buffer grows mid-generation
def test_static_cache_tree_forward_and_compaction_match_the_dynamic_cache(tiny_pair, capacity):
    model = tiny_pair.target.model
    want = tree_then_commit(CachedModel(model))
    lm = StaticCachedModel(model, capacity)
    lm.cache.kv = lm._alloc(capacity)  # below MIN_CAPACITY, to exercise growth
    got = tree_then_commit(lm)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
    assert lm.committed == len(PROMPT) - 1 + 5 and lm.length == lm.committed + 1
    if capacity == 4:
        assert lm.capacity >= lm.length  # doubled as needed


@pytest.mark.parametrize("capacity", [4, 256])  # 4: step() grows the buffer too
def test_step_is_a_one_token_causal_forward(tiny_pair, capacity):
    model = tiny_pair.target.model
    a, b = StaticCachedModel(model, capacity), StaticCachedModel(model, capacity)
    for lm in (a, b):
        lm.cache.kv = lm._alloc(capacity)  # below MIN_CAPACITY, to exercise growth
        lm.extend(PROMPT)
    tok = torch.tensor([PROMPT[-1]])
    for i in range(3):  # a chain: each step's top token feeds the next
        pos = torch.tensor([len(PROMPT) + i])
        (p_a, t_a), (p_b, t_b) = a.step(tok, pos, top=4), b.forward(tok, pos, keep=1, top=4)
        torch.testing.assert_close(p_a, p_b)
        assert torch.equal(t_a, t_b) and t_a.shape == (1, 4)
        tok = t_a[:, 0]
    pos = torch.tensor([len(PROMPT) + 3])
    assert torch.equal(a.step(tok, pos, argmax=True), b.forward(tok, pos, keep=1, argmax=True))
    assert a.length == b.length == len(PROMPT) + 4 and a.committed == b.committed
    assert (a.forward_calls, a.forward_tokens) == (b.forward_calls, b.forward_tokens)
    assert a.forward_seconds > 0


def test_draft_on_the_static_cache_matches_sequential(tiny_pair):
    model = tiny_pair.draft.model
    d = DraftModel(model, Warp(0.0), StaticCachedModel(model))
    d.lm.extend(PROMPT[:5])
    b = d.start(PROMPT)
    for parent, token in zip(PARENTS[1:], TOKENS[1:]):
        b.add(parent, token)
    for level in [[0], [1, 2, 12], [3, 4, 5], [6, 7, 8]]:
        probs = b.expand(level)
        for row, node in zip(probs, level):
            seq = CachedModel(model).extend(PROMPT + b.path_tokens(node))
            torch.testing.assert_close(row, torch.softmax(seq[-1], -1), atol=1e-5, rtol=1e-4)


def test_cached_model_reuses_one_buffer_per_model_and_resets_it(tiny_pair):
    model = tiny_pair.target.model
    a = cached_model(model, "fast", 300)
    a.extend(PROMPT)
    kv = a.cache.kv
    b = cached_model(model, "fast", 300)
    assert b is a and b.length == b.committed == 0 and b.forward_calls == 0
    assert b.cache.kv is kv  # no reallocation between generations
    assert cached_model(model, "fast", 10 * kv.shape[4]).capacity >= 10 * kv.shape[4]
    assert isinstance(cached_model(model, "eager"), CachedModel)
    with pytest.raises(
        ConfigError, match="engine: 'turbo' is not one of eager, fast, compiled, graphs"
    ):
        cached_model(model, "turbo")


def test_bucket_is_one_or_the_next_power_of_two_plus_one():
    ns = (1, 2, 3, 4, 5, 6, 9, 10, 17, 64, 65, 66, 257, 258, 513)
    assert [bucket(n) for n in ns] == [1, 2, 3, 5, 5, 9, 9, 17, 17, 65, 65, 129, 257, 513, 513]
    assert all(n <= bucket(n) < 2 * n for n in range(1, 600))


@pytest.mark.slow
def test_compiled_path_greedy_equals_autoregressive(llama_pair):
    """torch.compile over padded size buckets (inductor on the CPU; CUDA graphs on CUDA)."""
    ids = llama_pair.target.tokenizer.encode(PROMPTS[2])
    cases = [("autoregressive", {}), ("linear", {"k": 3}), ("dynatree", {})]
    # the draft's top-k and the target's argmax inside the graphs; DDTree's chain rollout
    cases += [("ddtree", {"B": 8, "L": 4})]
    for method, params in cases:
        got = generate(llama_pair, ids, method, 24, params=params, engine="compiled")
        assert tuple(got.tokens) == reference(llama_pair, PROMPTS[2], 24), method


@pytest.mark.parametrize("engine", ["fast", "graphs", "graphs+lean"])
def test_a_dropped_pair_is_freed_with_its_cached_models(engine):
    """The fast paths keep one cached model per model and engine (engine/runtime/static.py
    cached_model), and our forward one LeanLM per model (engine/runtime/lean.py lean); a worker
    that drops a pair for the next one must get its memory back: the models go once nothing but
    their cached models refers to them."""
    import gc
    import weakref

    from engine.models import load_pair

    pair = load_pair("tiny-llama", "tiny-llama-draft", "cpu", "float32")
    ids = pair.target.tokenizer.encode("def f(x):")
    generate(pair, ids, "linear", 8, engine=engine)
    models = [weakref.ref(pair.target.model), weakref.ref(pair.draft.model)]
    del pair
    gc.collect()
    assert [m() for m in models] == [None, None]
