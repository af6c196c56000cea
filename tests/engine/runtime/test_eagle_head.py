"""The EAGLE head (engine/runtime/eagle_head.py): its layer is its target family's decoder
layer (Hugging Face's, without the input norm), its cache and tree rows equal a cache-free
causal forward, its config follows the target's, and the public format round-trips
(engine/runtime/eagle_format.py)."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from engine.config import ConfigError
from engine.curves import measure_curve
from engine.runtime.eagle_format import (
    EMBED,
    eagle_config,
    head_config_from,
    load_folder,
    save_folder,
)
from engine.runtime.eagle_head import CachedHead, EagleHead, head_config
from engine.runtime.eagle_views import HeadAsLM


def _qwen2_config():
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=50,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        rope_theta=1e6,
    )


def _random_head(config, seed=0) -> EagleHead:
    torch.manual_seed(seed)
    head = EagleHead(head_config(config))
    with torch.no_grad():  # norms away from 1, biases away from 0: every tensor matters
        for p in head.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return head.eval()


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_layer_is_the_families_decoder_layer(family, llama_pair):
    """fc then Hugging Face's decoder layer of the family (its input norm an identity, as
    EAGLE's layer 0) gives the head's output."""
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer
    from transformers.models.qwen2.modeling_qwen2 import Qwen2DecoderLayer

    config = llama_pair.target.model.config if family == "llama" else _qwen2_config()
    config = copy.deepcopy(config)  # the session's model keeps its own
    config._attn_implementation = "eager"
    head = _random_head(config)
    hf = (LlamaDecoderLayer if family == "llama" else Qwen2DecoderLayer)(config, 0).eval()
    missing = hf.load_state_dict(
        {k.removeprefix("layers.0."): v for k, v in head.state_dict().items() if "layers" in k},
        strict=False,
    ).missing_keys
    assert missing == ["input_layernorm.weight"]
    hf.input_layernorm = torch.nn.Identity()
    n, h = 7, config.hidden_size
    gen = torch.Generator().manual_seed(1)
    embeds, feats = torch.randn(1, n, h, generator=gen), torch.randn(1, n, h, generator=gen)
    positions = torch.arange(3, 3 + n)[None]
    ours, _ = head(embeds, feats, positions)
    x = head.fc(torch.cat([embeds, feats], -1))
    causal = torch.full((n, n), float("-inf")).triu(1)[None, None]
    theirs = hf(
        x,
        attention_mask=causal,
        position_ids=positions,
        position_embeddings=head.rotary(x, positions),
    )
    theirs = theirs[0] if isinstance(theirs, tuple) else theirs
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_head_config_follows_the_target(llama_pair):
    c = head_config(llama_pair.target.model.config)
    assert (c.family, c.hidden_size, c.vocab_size, c.qkv_bias) == ("llama", 64, 260, False)
    q = head_config(_qwen2_config())
    assert (q.family, q.qkv_bias, q.rope_parameters["rope_theta"]) == ("qwen2", True, 1e6)
    with pytest.raises(ConfigError, match="llama or qwen2 target"):
        head_config(type("C", (), {"model_type": "gpt_neox"})())


def test_cache_and_tree_rows_equal_a_cache_free_forward(llama_pair):
    """Committed rows in two chunks, then two tree branches side by side with the
    ancestor-only mask, one compacted: each row equals the causal forward of its own path."""
    model = llama_pair.target.model
    head = _random_head(model.config)
    cached = CachedHead(head, model)
    h = model.config.hidden_size
    gen = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, 260, (9,), generator=gen)
    feats = torch.randn(9, h, generator=gen)

    def plain(rows: list[int]) -> torch.Tensor:  # [len(rows), H]: a causal forward from scratch
        embeds = model.get_input_embeddings()(tokens[rows])[None]
        return head(embeds, feats[rows][None], torch.arange(len(rows))[None])[0][0]

    def causal(s: int, n: int) -> torch.Tensor:  # [n, s + n]: all s earlier rows, then causal
        return torch.cat([torch.ones(n, s, dtype=torch.bool), torch.ones(n, n).tril().bool()], 1)

    with torch.no_grad():
        out1, _ = cached.forward(tokens[:3], feats[:3], torch.arange(3), causal(0, 3))
        cached.committed = 3
        out2, logits = cached.forward(tokens[3:5], feats[3:5], torch.arange(3, 5), causal(3, 2))
        cached.committed = 5
        torch.testing.assert_close(
            torch.cat([out1, out2]), plain(list(range(5))), atol=1e-5, rtol=0
        )
        torch.testing.assert_close(logits, model.lm_head(out2), atol=1e-5, rtol=0)
        # tree rows: a = rows 5, 6 (a chain) and b = rows 7, 8, at positions 5, 6 each
        visible = torch.zeros(4, 9, dtype=torch.bool)
        visible[:, :5] = True
        visible[[0, 1, 1], [5, 5, 6]] = True
        visible[[2, 3, 3], [7, 7, 8]] = True
        out, _ = cached.forward(tokens[5:], feats[5:], torch.tensor([5, 6, 5, 6]), visible)
        torch.testing.assert_close(out[:2], plain([0, 1, 2, 3, 4, 5, 6])[5:], atol=1e-5, rtol=0)
        torch.testing.assert_close(out[2:], plain([0, 1, 2, 3, 4, 7, 8])[5:], atol=1e-5, rtol=0)
        cached.commit([7])  # keep branch b's first row: committed rows 0..4, 7
        assert cached.committed == cached.length == 6
        out, _ = cached.forward(tokens[8:], feats[8:], torch.tensor([6]), causal(6, 1))
        torch.testing.assert_close(out, plain([0, 1, 2, 3, 4, 7, 8])[6:], atol=1e-5, rtol=0)


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_public_format_round_trip(family, llama_pair, tmp_path):
    config = llama_pair.target.model.config if family == "llama" else _qwen2_config()
    head = _random_head(config, seed=3)
    embed = torch.randn(config.vocab_size, config.hidden_size)
    save_folder(head, tmp_path / "h", embed=embed)
    state = torch.load(tmp_path / "h" / "pytorch_model.bin", weights_only=True)
    expected = {"fc.weight", "fc.bias", EMBED, "layers.0.post_attention_layernorm.weight"}
    expected |= {f"layers.0.self_attn.{p}_proj.weight" for p in "qkvo"}
    expected |= {f"layers.0.mlp.{p}_proj.weight" for p in ("gate", "up", "down")}
    if family == "qwen2":
        expected |= {f"layers.0.self_attn.{p}_proj.bias" for p in "qkv"}
    assert set(state) == expected
    raw = json.loads((tmp_path / "h" / "config.json").read_text())
    assert raw["num_hidden_layers"] == 1 and raw["bias"] is True
    assert raw.get("qkv_bias", False) is (family == "qwen2")
    back = load_folder(tmp_path / "h")
    assert back.cfg == head.cfg
    for k, v in head.state_dict().items():
        assert torch.equal(back.state_dict()[k], v), k
    # EAGLE's own config has no target_family: the family follows qkv_bias
    raw.pop("target_family")
    assert head_config_from(raw, "x").family == family
    assert eagle_config(back.cfg)["target_family"] == family


def test_bad_folders_are_one_line_errors(llama_pair, tmp_path):
    head = _random_head(llama_pair.target.model.config)
    save_folder(head, tmp_path / "h")
    state = torch.load(tmp_path / "h" / "pytorch_model.bin", weights_only=True)
    del state["fc.bias"]
    torch.save(state, tmp_path / "h" / "pytorch_model.bin")
    with pytest.raises(ConfigError, match="missing: fc.bias"):
        load_folder(tmp_path / "h")
    with pytest.raises(ConfigError, match="no config.json|cannot read"):
        load_folder(tmp_path / "nothing")
    raw = json.loads((tmp_path / "h" / "config.json").read_text())
    raw["num_hidden_layers"] = 2
    with pytest.raises(ConfigError, match="one layer"):
        head_config_from(raw, "x")


def test_head_forward_cost_curve(llama_pair):
    """An EAGLE draft's forward-cost curve times the head's own forwards (HeadAsLM): a
    context prefilled, n rows appended and dropped again, on the target's shapes."""
    head = _random_head(llama_pair.target.model.config)
    lm = HeadAsLM(head)
    with torch.inference_mode():
        lm.extend(list(range(8)))
        logits = lm.forward(torch.arange(4), torch.arange(8, 12), keep=0)
    assert lm.committed == 8 and lm.cached.length == 12 and logits.shape == (4, 260)
    lm.commit([])
    assert lm.cached.length == 8
    curve = measure_curve(head, "eagle:x", sizes=(1, 4), contexts=(0, 8), repeats=1)
    assert {(p.context, p.n) for p in curve.points} == {(0, 1), (0, 4), (8, 1), (8, 4)}
    assert all(p.seconds > 0 for p in curve.points)
