"""bench/dyspec_alignment.py at toy size: every method at both target temperatures, the pair's
total variation distance, JSON and table."""

import json

from bench import dyspec_alignment


def test_runs_and_writes_json(tmp_path, capsys):
    out = tmp_path / "r.json"
    args = ["--prompts", "1", "--new-tokens", "6", "--seeds", "1", "--budget", "8", "-o", str(out)]
    assert dyspec_alignment.main(args) == 0
    report = json.loads(out.read_text())
    rows = report["rows"]
    assert [(r["target_temperature"], r["method"]) for r in rows] == [
        (t, m) for t in (0.0, 0.6) for m in ("dyspec", "sequoia", "specinfer")
    ]
    assert all(r["tokens_per_iteration"] >= 1.0 and r["iterations"] >= 1 for r in rows)
    assert 0.0 <= report["mean_tv_at_temperature"] <= 1.0
    assert "mean TV(target, draft)" in capsys.readouterr().out
