"""Greedy golden test with the real Qwen2.5-Coder pair: 1 prompt x 16 tokens, every method
equal to autoregressive decoding, on the eager reference path and on the fast path. Slow (fp32 1.5B forwards on a 2-core CPU), marked `slow`;
skipped when the pair is not fetched (`orch models fetch NAME`). Sized so that `make test`
(CI) stays under 30 minutes with the fast suite (two prompts made the slow suite 934 s on this
project's CPU; one about half); `bench/methods.py` checks the same on longer generations.

Trees are capped at about 32 nodes: losslessness does not depend on the size, and a 256-node
fp32 verification costs ~7 s on a 2-core CPU."""

import functools

import pytest

from engine.datasets import encode_prompt, load_prompts
from engine.decode import generate
from engine.drafters import DRAFTERS

TARGET, DRAFT = "qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"
NEW = 16  # new tokens per prompt
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("all_threads")]


@functools.lru_cache(maxsize=1)
def real_pair():
    from engine.fetch import is_fetched
    from engine.models import load_pair

    if not (is_fetched(TARGET) and is_fetched(DRAFT)):
        pytest.skip("real pair not fetched")
    return load_pair(TARGET, DRAFT, device="cpu", dtype="float32")


@functools.lru_cache(maxsize=1)
def prompts_and_reference():
    pair = real_pair()
    ids = [
        encode_prompt(pair.target.tokenizer, p, prompt_tokens=64)
        for p in load_prompts("humaneval", n=1)
    ]
    return ids, [generate(pair, x, "autoregressive", NEW).tokens for x in ids]


@pytest.fixture(scope="module", autouse=True)
def free_the_pair():
    """Drop the pair (6 GB in fp32) after this module: the multinode test that follows loads
    it again in a worker process, and both together nearly filled a 24 GB machine."""
    yield
    real_pair.cache_clear(), prompts_and_reference.cache_clear()
    import gc

    gc.collect()


SMALL_TREES = {
    "dynatree": {"N_max": 32},
    "dyspec": {"budget": 32},
    "salf": {"N": 32, "B": 8},
    "beam": {"N": 32, "top_k": 4, "depth": 5},
    "ddtree": {"B": 32, "L": 8},
    "sequoia": {"budget": 32, "profile": "fixed"},
    "fixed_tree": {"budget": 24},
}


@pytest.mark.parametrize("engine", ["eager", "fast"])
@pytest.mark.parametrize("method", [m for m in DRAFTERS if m != "autoregressive"])
def test_every_method_matches_autoregressive_on_the_real_pair(method, engine):
    pair = real_pair()
    ids, ref = prompts_and_reference()
    accepted = 0
    for x, r in zip(ids, ref):
        g = generate(pair, x, method, NEW, params=SMALL_TREES.get(method), engine=engine)
        assert g.tokens == r, method
        accepted += sum(s.accepted for s in g.stats.iterations)
    assert accepted > 0


@pytest.mark.parametrize("method", ["linear", "dynatree"])
def test_our_own_forward_matches_autoregressive_on_the_real_pair(method):
    """Qwen2's biased projections, its rotary base and grouped heads through our forward
    (engine/runtime/lean.py, `fast+lean`) against Hugging Face's autoregressive decoding."""
    pair = real_pair()
    ids, ref = prompts_and_reference()
    for x, r in zip(ids, ref):
        g = generate(pair, x, method, NEW, params=SMALL_TREES.get(method), engine="fast+lean")
        assert g.tokens == r, method
