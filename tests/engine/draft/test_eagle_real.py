"""The EAGLE head on the real Qwen2 target (qwen2.5-coder-1.5b): a random Qwen2 head (q/k/v
biases, 12 query and 2 key/value heads, RoPE theta 1e6, the target's tied embedding and LM
head) drafts greedy-exact trees with EAGLE-2's beam and SALF. Slow (fp32 1.5B forwards on a
2-core CPU), marked `slow`; skipped when the target is not fetched (`orch models fetch`)."""

from __future__ import annotations

import functools

import pytest
import torch

from engine.datasets import encode_prompt, load_prompts
from engine.decode import generate
from engine.models import LoadedModel, Pair
from engine.runtime.eagle_head import EagleHead, head_config

TARGET = "qwen2.5-coder-1.5b"
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("all_threads")]


@functools.lru_cache(maxsize=1)
def real_target() -> LoadedModel:
    from engine.fetch import is_fetched
    from engine.models import load_model

    if not is_fetched(TARGET):
        pytest.skip("real target not fetched")
    return load_model(TARGET, device="cpu", dtype="float32")


def test_random_qwen2_head_is_greedy_exact_with_beam_and_salf():
    target = real_target()
    c = head_config(target.model.config)
    assert (c.family, c.qkv_bias, c.num_attention_heads, c.num_key_value_heads) == (
        "qwen2",
        True,
        12,
        2,
    )
    torch.manual_seed(0)
    head = EagleHead(c).eval()
    pair = Pair(target, LoadedModel("eagle:random", head, target.tokenizer, target.device,
                                    target.dtype))  # fmt: skip
    ids = encode_prompt(target.tokenizer, load_prompts("humaneval", n=1)[0], prompt_tokens=48)
    ref = generate(pair, ids, "autoregressive", 10).tokens
    for method, params in (("beam", {"N": 12, "top_k": 4, "depth": 3}), ("salf", {"N": 12})):
        g = generate(pair, ids, method, 10, params=params)
        assert g.tokens == ref, method
        assert all(it.tree_size > 1 for it in g.stats.iterations[:-1])
