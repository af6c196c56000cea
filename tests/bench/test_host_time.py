"""bench/host_time.py: its host-read counter, and an end-to-end run on the tiny pair."""

import json

import torch

from bench import host_time


def test_host_reads_counts_python_reads_of_tensor_values():
    t = torch.arange(6)
    with host_time.HostReads() as counter:
        int(t[2]), bool(t.all()), t.tolist(), t[1].item(), float(t[3]), [0, 1, 2][t[1]]
        t + 1, t.sum(), t[1:3]  # device work only: no reads
    assert sum(counter.counts.values()) == 6


def test_host_time_smoke(tmp_path, capsys):
    out = tmp_path / "h.json"
    host_time.main(
        ["--n-prompts", "1", "--max-new-tokens", "8", "--methods", "linear:k=2", "dynatree"]
        + ["--out", str(out)]
    )
    rows = json.loads(out.read_text())["rows"]
    assert [r["method"] for r in rows] == ["linear:k=2", "dynatree"]
    for r in rows:
        assert r["outputs_differing"] == 0
        assert r["host_ms_eager"] > 0 and r["host_ms_fast"] > 0
        assert r["host_reads_fast"] >= 1  # at least the accept decision
    assert "| linear:k=2 |" in capsys.readouterr().out
