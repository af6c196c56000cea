"""Caps (orchestrator/spec/limits.py, a sweep's `limits:` block): a huge grid is measured, not
expanded; every cap is refused by default and allowed when the sweep raises it; a read-only
database can still be read."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tracemalloc

import pytest

import orchestrator.spec.load as spec_load
from orchestrator.spec import load_sweep
from orchestrator.spec.limits import DEFAULT, grid_size
from orchestrator.spec.values import SpecError
from tests.orchestrator.orch_helpers import REPO, sweep_24
from tests.reliability.harness import drop_file_capabilities, populate, sweep


def test_grid_of_ten_million_fails_before_expanding(tmp_path, monkeypatch):
    def no_expansion(*a, **k):
        raise AssertionError("the grid was expanded")

    monkeypatch.setattr(spec_load, "expand", no_expansion)
    p = tmp_path / "huge.yaml"
    axis = list(range(1, 101))
    p.write_text(
        sweep(
            extra="repeats: 1000\n",
            methods=f"  - name: fixed_tree\n    grid: {{depth: {axis}, budget: {axis}}}\n",
        )
    )
    tracemalloc.start()
    start = time.monotonic()
    with pytest.raises(SpecError, match="expands to 10000000 trials before de-duplication"):
        load_sweep(p)
    seconds = time.monotonic() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert seconds < 5 and peak < 20 * 2**20, (seconds, peak)


def test_grid_size_counts_every_axis(tmp_path):
    s, trials = load_sweep(sweep_24(tmp_path / "s.yaml"))
    assert grid_size(s) == len(trials) == 24
    p = tmp_path / "m.yaml"
    p.write_text(
        sweep(
            mnt="[4, 8]",
            extra="repeats: 2\nsampling: {temperature: [0.0, 0.5], top_p: [0.9, 1.0]}\n",
            methods="  - name: linear\n    grid: {k: [1, 2, 3]}\n"
            "  - name: autoregressive\n    params: {max_new_tokens: 4}\n",
        )
    )
    s, trials = load_sweep(p)
    # 2 temperatures x 2 top_p x 2 repeats x (3 k x 2 max_new_tokens + 1 own max_new_tokens)
    assert grid_size(s) == len(trials) == 2 * 2 * 2 * (3 * 2 + 1)


@pytest.mark.parametrize(
    "body, refusing, refused, allowing",
    [
        (
            {"methods": "  - {name: linear, grid: {k: [1, 2, 3]}}\n"},
            "limits: {max_trials: 2}\n",
            "expands to 3 trials before de-duplication, more than limits.max_trials (2)",
            "limits: {max_trials: 3}\n",
        ),
        (
            {"methods": "  - {name: fixed_tree, params: {budget: 5000, depth: 13}}\n"},
            "",
            "builds draft trees of up to 5000 nodes, more than limits.max_tree_nodes (4096)",
            "limits: {max_tree_nodes: 8192}\n",
        ),
        (
            {"mnt": "10000"},
            "",
            "max_new_tokens: must be <= 8192 (limits.max_new_tokens), got 10000",
            "limits: {max_new_tokens: 20000}\n",
        ),
        (
            {"dataset": "{name: spec_bench, prompts: 3}"},
            "limits: {max_prompts: 2}\n",
            "dataset.prompts: must be <= 2 (limits.max_prompts), got 3",
            "limits: {max_prompts: 3}\n",
        ),
        (
            {"mnt": "4\nwarmup: 150"},
            "",
            "warmup: must be <= 100 (limits.max_warmup), got 150",
            "limits: {max_warmup: 200}\n",
        ),
    ],
)
def test_each_cap_is_refused_and_can_be_raised(tmp_path, body, refusing, refused, allowing):
    p = tmp_path / "s.yaml"
    p.write_text(sweep(extra=refusing, **body))
    with pytest.raises(SpecError) as e:
        load_sweep(p)
    assert refused in str(e.value) and "\n" not in str(e.value)
    p.write_text(sweep(extra=allowing, **body))
    s, trials = load_sweep(p)
    assert trials and s.to_dict()["limits"] != vars(DEFAULT)


def test_read_only_database_can_still_be_read(tmp_path):
    """status, query and export on a read-only SQLite file (as a user the permissions apply
    to) work and leave nothing behind; in a read-only folder, where SQLite cannot create the
    -shm file it reads through, they say so in one line. Writing commands: cases.py."""
    import tempfile

    d = tempfile.mkdtemp(prefix="orch-ro-", dir="/tmp")
    url = f"sqlite:///{d}/lab.db"
    populate(url)
    os.chmod(f"{d}/lab.db", 0o444)

    def orch(*args):
        return subprocess.run(
            [sys.executable, "-m", "orchestrator.cli", *args, "--db", url],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(REPO), "HOME": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=drop_file_capabilities,
        )

    try:
        os.chmod(d, 0o555)
        p = orch("status")
        assert p.returncode == 2 and p.stdout == "", p.stderr
        assert p.stderr == (
            f"error: cannot read database file {d}/lab.db: its folder {d} is read-only and "
            "SQLite must create lab.db-shm there (make the folder writable, or copy the file "
            "elsewhere)\n"
        )
        os.chmod(d, 0o755)
        for args in (["status"], ["query", "--best-by", "throughput"], ["export"]):
            p = orch(*args)
            # export's stdout is data: the line naming the sweep it read goes to stderr
            said = f"sweep 'existing': 1 finished trials in {url}\n" if args == ["export"] else ""
            assert p.returncode == 0 and p.stderr == said, (args, p.stderr)
            assert "existing" in p.stdout or "linear" in p.stdout
    finally:
        os.chmod(d, 0o755)
        for f in os.listdir(d):
            os.remove(os.path.join(d, f))
        os.rmdir(d)
