"""`orch submit --dry-run`: trials per method, how many are done, an estimate from past
trials of the same configs, and nothing written (no file created, the database unchanged)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from click.testing import CliRunner

from orchestrator.cli import main
from tests.orchestrator.orch_helpers import TINY_SWEEP


def _digest(path: Path) -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal"))
                                   if p.exists())).hexdigest()  # fmt: skip


def test_dry_run_counts_estimates_and_writes_nothing(tmp_path):
    sweep = tmp_path / "s.yaml"
    sweep.write_text(TINY_SWEEP.format(name="dry"))
    db = tmp_path / "orch.db"
    url = f"sqlite:///{db}"
    r = CliRunner().invoke(main, ["submit", str(sweep), "--dry-run", "--db", url])
    assert r.exit_code == 0, r.output
    assert "2 trials, 0 already done, 2 would run" in r.output and "no database yet" in r.output
    assert not db.exists()  # nothing created
    r = CliRunner().invoke(main, ["submit", str(sweep), "--executor", "local", "--db", url])
    assert r.exit_code == 0, r.output
    before = _digest(db)
    r = CliRunner().invoke(main, ["submit", str(sweep), "--dry-run", "--db", url])
    assert r.exit_code == 0, r.output
    assert "2 trials, 2 already done, 0 would run" in r.output
    longer = tmp_path / "longer.yaml"  # the same configs with twice the new tokens: new trials
    longer.write_text(
        TINY_SWEEP.format(name="dry2").replace("max_new_tokens: 4", "max_new_tokens: 8")
    )
    r = CliRunner().invoke(main, ["submit", str(longer), "--dry-run", "--db", url,
                                  "--only", "method=linear"])  # fmt: skip
    assert r.exit_code == 0, r.output
    line = r.output.strip().splitlines()[-1]
    assert "2 trials, 0 already done, 1 would run; estimated" in line, line
    assert "for 1 of them" in line and "Nothing was written" in line
    table = r.output.splitlines()
    linear = next(t for t in table if t.startswith("linear"))
    assert linear.split()[1:6] == ["1", "0", "0", "1", "1"]  # trials done failed to_run estimated
    assert _digest(db) == before
    r = CliRunner().invoke(main, ["status", "--db", url])
    assert "dry2" not in r.output  # no sweep was stored
