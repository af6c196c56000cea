"""bench/gpu_lease.sh, the one device call's script, at toy sizes on this CPU (TINY=1): every
step runs to exit 0 and writes its record, so the day a GPU is lent the script is known to run
(what a GPU alone checks, CUDA graphs and the kernels' compilation, it checks there)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ["synthetic_7b", "synthetic_1.5b", "gpu_lean", "exact_lean", "gaps", "gpu"]


@pytest.mark.slow
def test_every_step_runs_at_toy_sizes(tmp_path):
    env = {**os.environ, "TINY": "1", "OUT": str(tmp_path), "PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", str(ROOT / "bench/gpu_lease.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    exits = [ln for ln in done.stdout.splitlines() if ": exit " in ln]
    assert len(exits) == len(RECORDS) and all(ln.endswith("exit 0") for ln in exits), exits
    for name in RECORDS:
        assert json.loads((tmp_path / f"{name}.json").read_text()), name
    rows = json.loads((tmp_path / "synthetic_7b.json").read_text())["rows"]
    assert {r["align"] for r in rows} == {0.75, 0.9}
    assert all(r["outputs_differ"] == 0 for r in rows if r["method"] != "autoregressive")
