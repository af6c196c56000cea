"""bench/real_pair.py on the tiny pair with an EAGLE head beside the draft: a contender per
head and head method, every output equal to autoregressive decoding, and the iteration's time
split into parts that add up to the contender's time."""

import json

import pytest
import torch

from bench import real_pair
from engine.models import load_model
from engine.runtime.eagle_format import save_folder
from engine.runtime.eagle_head import EagleHead, head_config


def test_heads_are_contenders_with_their_time_split(tmp_path):
    target = load_model("tiny-llama")
    torch.manual_seed(0)
    save_folder(EagleHead(head_config(target.model.config)).eval(), tmp_path / "head")
    head = f"eagle:{tmp_path / 'head'}"
    out = tmp_path / "real.json"
    argv = ["--target", "tiny-llama", "--draft", "tiny-llama-draft", "--dataset", "spec_bench"]
    argv += ["--n-prompts", "2", "--prompt-tokens", "32", "--max-new-tokens", "8", "--hf"]
    argv += ["--methods", "linear:k=2", "--heads", head, "--head-methods", "linear:k=3"]
    argv += ["beam:N=6,top_k=2,depth=3", "--out", str(out)]
    assert real_pair.main(argv) == 0
    record = json.loads(out.read_text())
    names = [r["contender"] for r in record["rows"]]
    assert names == [
        "ours:autoregressive",
        "linear:k=2",
        f"{head}/linear:k=3",
        f"{head}/beam:N=6,top_k=2,depth=3",
    ]
    assert record["heads"][head]["kind"] == "eagle-folder"
    for r in record["rows"]:
        assert r["outputs_differing_from_ours_ar"] == 0
        split = r["ms_per_iteration"]
        assert set(split) == {"draft_forwards", "draft_other", "target_forward", "other"}
        per_iteration_ms = 1000 * r["tokens_per_iteration"] / r["tokens_per_s"]  # time / its
        assert sum(split.values()) == pytest.approx(per_iteration_ms, rel=1e-6)
    assert record["rows"][0]["ms_per_iteration"]["draft_forwards"] == 0
