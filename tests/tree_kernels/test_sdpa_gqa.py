"""tree_kernels/sdpa_gqa.py, the engine's default attention: under a tree mask it gives transformers'
sdpa's outputs without copying keys/values to every query head, and it is what models load with."""

import pytest
import torch
import transformers.integrations.sdpa_attention as hf_sdpa

from engine.models import load_model
from engine.runtime.eager import CachedModel
from engine.runtime.static import StaticCachedModel
from engine.tree import Tree


def _tree_logits(model, engine: str) -> torch.Tensor:
    lm = CachedModel(model) if engine == "eager" else StaticCachedModel(model)
    lm.extend(list(range(3, 40)))
    tree = Tree(
        tokens=torch.tensor([7, 8, 9, 10, 11]),
        parents=torch.tensor([-1, 0, 0, 1, 2]),
        depth=torch.tensor([0, 1, 1, 2, 2]),
    )
    p = lm.committed
    visible = tree.visibility(p)  # [5, p + 5]
    return lm.forward(tree.tokens, tree.position_ids(p)[0], visible, tree.parents)  # [5, V]


@pytest.mark.parametrize("engine", ["eager", "fast"])
def test_tree_forward_equals_sdpa_without_repeat_kv(engine, monkeypatch):
    model = load_model("tiny-llama").model  # 4 query heads, 2 key/value heads
    assert model.config._attn_implementation == "sdpa_gqa"
    assert model.config.num_key_value_heads < model.config.num_attention_heads
    with torch.inference_mode():
        ours = _tree_logits(model, engine)
        model.set_attn_implementation("sdpa")
        calls = []
        real = hf_sdpa.repeat_kv
        monkeypatch.setattr(hf_sdpa, "repeat_kv", lambda *a: calls.append(1) or real(*a))
        ref = _tree_logits(model, engine)
        assert calls, "transformers' sdpa copies keys/values per head under a mask"
        model.set_attn_implementation("sdpa_gqa")
        calls.clear()
        again = _tree_logits(model, engine)
    assert not calls, "sdpa_gqa must not copy keys/values per query head"
    torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(again, ours)
