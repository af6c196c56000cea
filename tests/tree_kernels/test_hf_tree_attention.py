"""Tree verification forward of tiny random HF models through the registered kernel.

Oracle: the same model under "sdpa" with an explicit 4D additive ancestor mask. Both runs
use position ids prefix_len + depth (DDTree Sec. 4.4) over a DynamicCache prefix. With
TRITON_INTERPRET=1 (or CUDA) the layers run the Triton kernel, otherwise the reference.
"""

import pytest
import torch

transformers = pytest.importorskip("transformers")

import tree_kernels  # noqa: E402
from tests.trees import random_bushy_tree  # noqa: E402
from tree_kernels.hf_attention import register, tree_parents  # noqa: E402
from tree_kernels.reference import node_depths, tree_attention_mask  # noqa: E402

PREFIX, NODES, VOCAB = 13, 40, 256


def tiny_model(arch: str):
    """2-layer fp32 models with head dim 64 (a size the Triton kernel supports)."""
    common = dict(
        vocab_size=VOCAB,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        max_position_embeddings=512,
    )
    torch.manual_seed(0)
    if arch == "llama":
        model = transformers.LlamaForCausalLM(
            transformers.LlamaConfig(num_key_value_heads=1, **common)
        )
    elif arch == "qwen2":
        model = transformers.Qwen2ForCausalLM(
            transformers.Qwen2Config(num_key_value_heads=1, **common)
        )
    else:
        model = transformers.GPTNeoXForCausalLM(transformers.GPTNeoXConfig(**common))
    return model.eval()


def tree_case(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    prefix = torch.randint(0, VOCAB, (1, PREFIX), generator=gen)
    parents = random_bushy_tree(NODES, 6, gen)
    tokens = torch.randint(0, VOCAB, (1, NODES), generator=gen)
    return prefix, parents, tokens


@torch.no_grad()
def tree_logits(model, impl, prefix, parents, tokens, mask_parents=None):
    """Prefill the prefix into a fresh DynamicCache, then one forward over the tree."""
    model.set_attn_implementation(impl)
    cache = transformers.DynamicCache(config=model.config)
    model(input_ids=prefix, past_key_values=cache, use_cache=True)
    position_ids = (PREFIX + node_depths(parents))[None]  # [1, N]
    if impl == "sdpa":
        mask = tree_attention_mask(
            parents if mask_parents is None else mask_parents, PREFIX, torch.float32
        )
        return model(
            input_ids=tokens,
            position_ids=position_ids,
            attention_mask=mask[None, None],
            past_key_values=cache,
        ).logits
    with tree_parents(parents):
        return model(input_ids=tokens, position_ids=position_ids, past_key_values=cache).logits


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gpt_neox"])
def test_tree_forward_matches_sdpa_with_ancestor_mask(arch, monkeypatch):
    model = tiny_model(arch)
    name = register()
    calls = []
    inner = tree_kernels.tree_attention

    def counted(q, *args, **kw):
        calls.append(tree_kernels.uses_triton(q))
        return inner(q, *args, **kw)

    monkeypatch.setattr(tree_kernels, "tree_attention", counted)
    prefix, parents, tokens = tree_case()
    expected = tree_logits(model, "sdpa", prefix, parents, tokens)
    got = tree_logits(model, name, prefix, parents, tokens)
    # One call per layer, on the Triton kernel wherever it can run (here: interpreter or CUDA).
    assert (
        calls
        == [tree_kernels.uses_triton(torch.zeros(1, 2, NODES, 64))] * model.config.num_hidden_layers
    )
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    # Sensitivity: the oracle under a different tree (a chain) gives other logits.
    chain = torch.arange(-1, NODES - 1)
    other = tree_logits(model, "sdpa", prefix, parents, tokens, mask_parents=chain)
    assert (other - expected).abs().max() > 1e-2


@pytest.mark.parametrize("arch", ["llama", "gpt_neox"])
def test_outside_the_context_it_is_sdpa(arch):
    """Prefill and single-token decode (no tree_parents) give sdpa's logits."""
    model = tiny_model(arch)
    name = register()
    prefix, _, tokens = tree_case(1)
    results = {}
    for impl in ("sdpa", name):
        model.set_attn_implementation(impl)
        cache = transformers.DynamicCache(config=model.config)
        with torch.no_grad():
            first = model(input_ids=prefix, past_key_values=cache, use_cache=True).logits
            step = model(input_ids=tokens[:, :1], past_key_values=cache, use_cache=True).logits
            chunk = model(input_ids=tokens[:, 1:6], past_key_values=cache, use_cache=True).logits
        results[impl] = (first, step, chunk)
    for a, b in zip(results["sdpa"], results[name]):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_node_count_must_match_the_forward():
    model = tiny_model("llama")
    model.set_attn_implementation(register())
    prefix, parents, tokens = tree_case(2)
    with torch.no_grad(), tree_parents(parents[:5]), pytest.raises(ValueError, match="5 nodes"):
        model(input_ids=tokens, past_key_values=transformers.DynamicCache(config=model.config))
