"""Model registry: tiny models, local Hugging Face folders, name resolution, dtype/device."""

import pytest
import torch

from engine.config import ConfigError
from engine.decode import generate
from engine.devices import pick_device, pick_dtype
from engine.models import TINY_MODELS, load_model, load_pair, resolve


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory):
    """A small Llama with a character-level fast tokenizer, saved as a Hugging Face folder."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    chars = [chr(i) for i in range(32, 127)]
    vocab = {"<unk>": 0, "<eos>": 1, **{c: i + 2 for i, c in enumerate(chars)}}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Split(Regex("."), "isolated")
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", eos_token="<eos>")
    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(vocab),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            initializer_range=0.2,
            eos_token_id=1,
        )
    )
    folder = tmp_path_factory.mktemp("hf") / "char-llama"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder, model


def test_local_folder_loads_and_generates(hf_folder):
    folder, model = hf_folder
    assert resolve(str(folder)) == "folder"
    lm = load_model(str(folder), device="cpu", dtype="float32")
    assert lm.tokenizer.encode("hi") == [ord("h") - 30, ord("i") - 30]
    for a, b in zip(lm.model.parameters(), model.parameters()):
        assert torch.equal(a, b)
    pair = load_pair(str(folder), str(folder))
    ids = lm.tokenizer.encode("hello world")
    g = generate(pair, ids, "linear", 20, params={"k": 3})
    assert g.tokens == generate(pair, ids, "autoregressive", 20).tokens
    assert g.stats.summary()["acceptance_rate"] == 1.0  # draft == target
    assert isinstance(lm.tokenizer.decode(g.tokens), str)


def test_unknown_names_and_broken_folders(tmp_path):
    with pytest.raises(ConfigError, match="unknown model 'nope'"):
        resolve("nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="unknown model"):
        resolve(str(tmp_path / "empty"))  # no config.json
    with pytest.raises(ConfigError, match="unknown dtype"):
        pick_dtype("float8", torch.device("cpu"))


def test_defaults_and_tiny_registry():
    assert pick_device("auto").type in ("cpu", "cuda")
    assert pick_dtype("auto", torch.device("cpu")) == torch.float32
    assert pick_dtype("auto", torch.device("cuda")) == torch.bfloat16
    assert set(TINY_MODELS) == {"tiny-llama", "tiny-llama-draft", "tiny-neox", "tiny-neox-draft"}
    a, b = load_model("tiny-neox"), load_model("tiny-neox")  # fixed seeds: identical weights
    for x, y in zip(a.model.parameters(), b.model.parameters()):
        assert torch.equal(x, y)
    t, d = load_model("tiny-llama"), load_model("tiny-llama-draft")
    diffs = [float((x - y).abs().max()) for x, y in zip(t.model.parameters(), d.model.parameters())]
    assert max(diffs) > 0, "the draft must differ from its target"


def test_building_a_tiny_model_leaves_the_global_rng_alone():
    """Seeded weights come from a forked RNG: the caller's random stream is unchanged, and the
    weights are the same whatever the caller's seed."""
    from engine.tiny_models import build_tiny

    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    a = build_tiny("tiny-llama")
    assert torch.equal(torch.rand(3), expected)
    torch.manual_seed(8)
    b = build_tiny("tiny-llama")
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
