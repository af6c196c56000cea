"""engine/hub.py without a network: which names are hub ids, the cache read as huggingface_hub
lays it out (refs, commits, a snapshot without config.json), a worker's one line for a model it
cannot get offline, and the tokenizer comparison on each kind of difference."""

from __future__ import annotations

import json

import pytest

from engine import hub
from engine.config import ConfigError
from tests.hub_cache import put_snapshot


def test_hub_id_forms():
    for name in ("meta-llama/Llama-2-7b-hf", "JackFram/llama-68m", "Qwen/Qwen2.5-0.5B-Instruct"):
        assert hub.is_hub_id(name)
    for name in ("tiny-llama", "/models/llama", "./m/x", "~/m/x", "a/b/c", "a/../b", "a/b.", "a/"):
        assert not hub.is_hub_id(name)


def test_the_cache_as_huggingface_hub_lays_it_out(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    commit = put_snapshot(tmp_path / "home" / "hub", "org/m", folder, ("main", "v1"))
    for rev in (None, "main", "v1", commit):
        snap = hub.cached("org/m", rev)
        assert snap is not None and snap.commit == commit and (snap.folder / "config.json").exists()
    assert hub.cached("org/m", "v2") is None and hub.cached("org/other") is None
    assert hub.cached("org/m", "0" * 40) is None  # a commit the cache lacks
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "elsewhere"))  # read at call time
    assert hub.cached("org/m") is None


def test_a_worker_offline_without_the_model_says_so_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError) as e:
        hub.download("org/absent", "v3")
    assert str(e.value).startswith("model org/absent@v3 is not in the Hugging Face cache")
    assert "HF_HUB_OFFLINE is set" in str(e.value) and "\n" not in str(e.value)
    assert hub.check("org/absent", None, here=False) is None  # a remote worker may have it


def _sig(tokens=None, **specials):
    sig = {"config_vocab": 10, **specials}
    if tokens is not None:
        table = {t: i for i, t in enumerate(tokens)}
        sig.update(tokens=len(table), vocab=hash(tuple(table.items())), ids=table)
    return sig


def test_tokenizer_differences_each_named():
    same = _sig(list("abc"), eos_token="</s>")
    assert hub.tokenizer_mismatch(same, dict(same)) is None
    assert "3 vs 4 tokens" in hub.tokenizer_mismatch(same, _sig(list("abcd"), eos_token="</s>"))
    moved = hub.tokenizer_mismatch(same, _sig(list("acb"), eos_token="</s>"))
    assert moved == "vocabularies differ (2 of 3 tokens have other ids)"
    assert "eos token differs" in hub.tokenizer_mismatch(same, _sig(list("abc"), eos_token="<e>"))
    assert "bos_token_id differs (1 vs 2)" in hub.tokenizer_mismatch(_sig(bos_id=1), _sig(bos_id=2))
    sp = hub.tokenizer_mismatch({"sentencepiece": "x"}, {"sentencepiece": "y"})
    assert sp == "their sentencepiece models (tokenizer.model) differ"
    cfg = hub.tokenizer_mismatch({"config_vocab": 5}, {"config_vocab": 6})
    assert cfg == "vocabularies differ (5 vs 6 in config.json)"
