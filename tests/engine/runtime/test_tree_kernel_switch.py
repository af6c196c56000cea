"""The engine's verification forward through the Triton tree kernel (attn="tree_triton")
emits the same greedy tokens as sdpa with a dense ancestor mask. Head dim 64 so the Triton
kernel itself runs (under TRITON_INTERPRET=1 on CPU), not the reference fallback."""

import os

import pytest
import torch

from engine.decode import generate
from engine.models import ByteTokenizer, LoadedModel, Pair

pytest.importorskip("triton")
if not (torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1"):
    pytest.skip("needs CUDA or TRITON_INTERPRET=1", allow_module_level=True)


def tiny_d64(attn: str, noise: float, seed: int = 5) -> LoadedModel:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=260,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        initializer_range=0.1,
        max_position_embeddings=1024,
    )
    model = LlamaForCausalLM(cfg)
    if noise:
        gen = torch.Generator().manual_seed(seed + 1)
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() >= 2:
                    p.add_(noise * p.std() * torch.randn(p.shape, generator=gen))
    if attn == "tree_triton":
        from tree_kernels.hf_attention import register

        register()
    model.set_attn_implementation(attn)
    model.eval()
    return LoadedModel("d64", model, ByteTokenizer(), torch.device("cpu"), torch.float32)


@pytest.mark.parametrize("engine", ["eager", "fast"])
@pytest.mark.parametrize(
    "method,params", [("linear", {"k": 3}), ("fixed_tree", {"depth": 3, "branch": 2, "budget": 10})]
)
def test_tree_kernel_switch_is_lossless(method, params, engine, monkeypatch):
    import tree_kernels

    calls = []
    real = tree_kernels.tree_attention

    def spy(q, *a, **k):
        calls.append(tree_kernels.uses_triton(q))
        return real(q, *a, **k)

    monkeypatch.setattr(tree_kernels, "tree_attention", spy)
    draft = tiny_d64("sdpa", noise=0.03)
    ref_pair = Pair(tiny_d64("sdpa", 0.0), draft)
    tri_pair = Pair(tiny_d64("tree_triton", 0.0), draft)
    ids = ByteTokenizer().encode("tree attention, verified in one pass")
    ref = generate(ref_pair, ids, "autoregressive", 24).tokens
    g = generate(tri_pair, ids, method, 24, params=params, engine=engine)
    assert g.tokens == ref
    assert max(s.tree_size for s in g.stats.iterations) > 1
    assert calls and all(calls), "every tree forward must run the Triton kernel"
