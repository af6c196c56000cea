"""bench/synthetic_alignment.py: the knob's table at toy sizes; the agreement on random
contexts is near the knob and grows with it, and the record is written."""

import json

from bench import synthetic_alignment


def test_the_table_follows_the_knob(tmp_path):
    out = tmp_path / "sa.json"
    argv = ["--target", "synthetic:toy-draft", "--draft", "synthetic:toy-draft@seed=0"]
    argv += ["--aligns", "0.5,0.9", "--n-prompts", "1", "--max-new-tokens", "16"]
    argv += ["--prompt-tokens", "8", "--random-tokens", "512", "--out", str(out)]
    assert synthetic_alignment.main(argv) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["align"] for r in rows] == [0.5, 0.9]
    for r in rows:  # one shape: the target's choices nest in the reference's (align 1)
        assert abs(r["agreement_random_contexts"] - r["align"]) < 0.1, r
    low, high = rows
    assert low["agreement_random_contexts"] < high["agreement_random_contexts"]
    assert low["linear_k4_tokens_per_iteration"] <= high["linear_k4_tokens_per_iteration"]
