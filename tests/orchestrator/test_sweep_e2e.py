"""A 24-config sweep on the tiny models end to end, on SQLite and on the real Postgres server:
it completes, resubmitting runs nothing, and a driver killed with SIGKILL mid-sweep is
finished by `orch resume` with exactly one result per config."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from click.testing import CliRunner
from sqlalchemy import func, select

from db.models import Result, Sweep, SweepTrial, Trial
from orch_helpers import PG_PASSWORD, REPO, sweep_24
from orchestrator.cli import main
from orchestrator.store import Store


def _cli(*args):
    r = CliRunner().invoke(main, list(args))
    assert PG_PASSWORD not in r.output
    return r


def _results(url, sweep):
    """(results, distinct hashes, trials of the sweep, done trials, trials without result)"""
    store = Store(url)
    with store.Session() as s:
        members = select(SweepTrial.trial_id).join(Sweep).where(Sweep.name == sweep)
        res = s.scalar(select(func.count()).select_from(Result).where(Result.trial_id.in_(members)))
        hashes = s.scalar(select(func.count(func.distinct(Result.config_hash)))
                          .where(Result.trial_id.in_(members)))
        trials = s.scalar(select(func.count()).select_from(Trial).where(Trial.id.in_(members)))
        done = s.scalar(select(func.count()).select_from(Trial).where(
            Trial.id.in_(members), Trial.status == "done"))
        per_trial = s.execute(select(Trial.id, func.count(Result.id)).outerjoin(
            Result, Result.trial_id == Trial.id).where(Trial.id.in_(members))
            .group_by(Trial.id)).all()
    store.close()
    return res, hashes, trials, done, sorted({n for _, n in per_trial})


def test_sweep_24_completes_and_resubmit_runs_nothing(db_url, tmp_path):
    spec = sweep_24(tmp_path / "s.yaml")
    r = _cli("submit", str(spec), "--db", db_url, "--executor", "local")
    assert r.exit_code == 0, r.output
    assert "24 trials; ran 24 (24 done, 0 failed, 0 retried)" in r.output
    assert _results(db_url, "tiny24") == (24, 24, 24, 24, [1])
    r = _cli("submit", str(spec), "--db", db_url, "--executor", "local")
    assert r.exit_code == 0, r.output
    assert "(0 new, 24 already done)" in r.output and "ran 0 (" in r.output
    assert _results(db_url, "tiny24") == (24, 24, 24, 24, [1])
    r = _cli("status", "tiny24", "--db", db_url, "--format", "json")
    assert '"done": 24' in r.output and '"status": "finished"' in r.output


def test_sigkill_driver_then_resume(db_url, tmp_path):
    spec = sweep_24(tmp_path / "k.yaml", name="kill24", max_new_tokens=12)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "submit", str(spec),
                             "--db", db_url, "--executor", "local"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 180
    try:
        while time.time() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"driver ended before the kill: {proc.communicate()}")
            try:
                if _results(db_url, "kill24")[0] >= 3:
                    break
            except Exception:  # noqa: BLE001 - schema or sweep not there yet
                pass
            time.sleep(0.2)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        out, err = proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert PG_PASSWORD not in out + err
    before = _results(db_url, "kill24")
    assert 3 <= before[0] < 24, before
    r = _cli("resume", "kill24", "--db", db_url, "--executor", "local")
    assert r.exit_code == 0, r.output
    assert f"ran {24 - before[0]} (" in r.output
    assert _results(db_url, "kill24") == (24, 24, 24, 24, [1])
