"""bench/eagle_heads.py on a tiny target with a random head in EAGLE's format: a row per head
and tree construction, tau inside its bootstrap interval, every output equal to
autoregressive decoding."""

import json

import torch

from bench import eagle_heads
from engine.models import load_model
from engine.runtime.eagle_format import save_folder
from engine.runtime.eagle_head import EagleHead, head_config


def test_rows_per_head_and_tree(tmp_path):
    target = load_model("tiny-llama")
    torch.manual_seed(0)
    save_folder(EagleHead(head_config(target.model.config)).eval(), tmp_path / "head")
    out = tmp_path / "heads.json"
    argv = ["--target", "tiny-llama", "--heads", f"eagle:{tmp_path / 'head'}"]
    argv += ["--trees", "beam,salf", "--dataset", "spec_bench", "--n-prompts", "2"]
    argv += ["--prompt-tokens", "32", "--max-new-tokens", "8", "--out", str(out)]
    assert eagle_heads.main(argv) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["tree"]) for r in rows] == ["beam", "salf"]
    for r in rows:
        assert r["outputs_differ"] == 0
        assert r["tau_lo"] <= r["tau"] <= r["tau_hi"] and r["tau"] >= 1
