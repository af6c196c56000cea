"""bench/cost_model.py on an aligned synthetic pair at toy sizes: one row per method and
alignment with the measured and predicted speedups, HF assisted generation measured beside,
the record written; a non-synthetic target with --aligns refused before anything loads."""

import json

import pytest

from bench import cost_model

PAIR = ["--target", "synthetic:toy-draft", "--draft", "synthetic:toy-draft@seed=0"]
SMALL = ["--sizes", "1,2,4", "--contexts", "0", "--repeats", "1", "--prompt-tokens", "16"]


def test_rows_per_alignment_with_predictions_and_hf_assisted(tmp_path):
    out = tmp_path / "cm.json"
    argv = PAIR + SMALL + ["--aligns", "0.6,0.95", "--n-prompts", "1", "--max-new-tokens", "12"]
    argv += ["--methods", "autoregressive", "linear:k=3", "--hf-assisted", "--out", str(out)]
    assert cost_model.main(argv) == 0
    record = json.loads(out.read_text())
    rows = {(r["align"], r["method"]): r for r in record["rows"]}
    assert set(rows) == {
        (a, m) for a in (0.6, 0.95) for m in ("autoregressive", "linear:k=3", "hf_assisted")
    }
    for a in (0.6, 0.95):
        lin = rows[a, "linear:k=3"]
        assert lin["predicted_speedup"] > 0 and lin["measured_speedup"] > 0
        assert lin["relative_error"] == pytest.approx(
            lin["predicted_speedup"] / lin["measured_speedup"] - 1
        )
        assert rows[a, "autoregressive"]["measured_speedup"] == pytest.approx(1.0)
        assert rows[a, "hf_assisted"]["new_tokens"] == 12
        assert all(rows[a, m]["outputs_differ"] == 0 for m in ("linear:k=3", "hf_assisted"))
    # greedy acceptance follows the knob (one shape: the draft is the reference, align 1)
    assert rows[0.95, "linear:k=3"]["acceptance"] > rows[0.6, "linear:k=3"]["acceptance"]
    assert set(record["per_prompt"]) == {"0.6", "0.95"} and record["curves"]["target"]["points"]


def test_aligns_need_a_synthetic_target():
    with pytest.raises(SystemExit) as e:
        cost_model.main(
            ["--target", "tiny-llama", "--draft", "tiny-llama-draft", "--aligns", "0.5"]
        )
    assert "needs a synthetic target" in str(e.value)
