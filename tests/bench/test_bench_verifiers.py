"""bench/verifiers.py runs end to end on the tiny pair and writes its JSON (smoke test)."""

import json

from bench import verifiers


def test_bench_verifiers_smoke(tmp_path, capsys):
    out = tmp_path / "v.json"
    verifiers.main(
        [
            "--prompts",
            "1",
            "--roots",
            "2",
            "--K",
            "2",
            "--L",
            "2",
            "--temperatures",
            "0.6",
            "--out",
            str(out),
        ]
    )  # --threads 1, as the suite
    report = json.loads(out.read_text())
    best = report["results"]["0.6"]["best"]
    assert set(best) == set(report["verifiers"]) and "traversal" in best
    assert all(1.0 <= b["block_efficiency"] <= 3.0 for b in best.values())
    grid = report["results"]["0.6"]["grid"]["nss"]
    assert len(grid) == 2 and len(grid[0]) == 2
    assert "| traversal |" in capsys.readouterr().out
