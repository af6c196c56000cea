"""bench/sdpa_gqa.py on the tiny target: both attentions timed per size, every generation under
either attention equal to autoregressive decoding under transformers' sdpa."""

import json
import sys

from bench import sdpa_gqa


def test_sdpa_gqa_bench_tiny(tmp_path, monkeypatch):
    out = tmp_path / "g.json"
    argv = ["sdpa_gqa.py", "--target", "tiny-llama", "--n-prompts", "2", "--prompt-tokens", "48"]
    argv += ["--max-new-tokens", "8", "--sizes", "1,4", "--repeats", "1"]
    argv += ["--methods", "autoregressive,lookup:k=2", "--out", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    sdpa_gqa.main()
    record = json.loads(out.read_text())
    assert [r["n"] for r in record["forward"]] == [1, 4]
    assert all(r["sdpa_ms"] > 0 and r["sdpa_gqa_ms"] > 0 for r in record["forward"])
    runs = {r["run"]: r for r in record["generation"]}
    assert set(runs) == {
        f"{m} {a}" for m in ("autoregressive", "lookup:k=2") for a in sdpa_gqa.ATTENTIONS
    }
    assert all(r["outputs_equal_ar_sdpa"] == "2/2" for r in runs.values())


def test_hf_contenders_run_stock_sdpa():
    from bench.hf_contenders import stock_attention
    from engine.models import load_model

    model = load_model("tiny-llama").model
    assert model.config._attn_implementation == "sdpa_gqa"
    with stock_attention(model):
        assert model.config._attn_implementation == "sdpa"
    assert model.config._attn_implementation == "sdpa_gqa"
