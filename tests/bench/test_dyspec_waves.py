"""bench/dyspec_waves.py at toy size: node-by-node and wave trees from the same contexts."""

from __future__ import annotations

import json

from bench import dyspec_waves


def test_greedy_waves_build_the_same_trees(tmp_path):
    out = tmp_path / "waves.json"
    args = ["--draft", "tiny-llama-draft", "--draft-temperature", "0", "--n-prompts", "1"]
    args += ["--prompt-tokens", "16", "--cuts", "2,4", "--budgets", "8,300", "--out", str(out)]
    assert dyspec_waves.main(args) == 0
    record = json.loads(out.read_text())
    assert [r["budget"] for r in record["rows"]] == [8, 300]
    assert all(r["same_trees"] and r["trees"] == 2 for r in record["rows"])
    wide = record["rows"][1]  # beyond the root's children: a second level, one wave
    assert wide["wave_forwards"] <= wide["node_forwards"] and wide["wave_rows"] >= 1
    assert record["curve"] is None or wide["wave_gpu_ms"] > 0
