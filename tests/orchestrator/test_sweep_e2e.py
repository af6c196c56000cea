"""A 24-config sweep on the tiny models end to end, on SQLite and on the real Postgres server:
it completes, resubmitting runs nothing, and a driver killed with SIGKILL mid-sweep is
finished by `orch resume` with exactly one result per config."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

from click.testing import CliRunner
from orch_helpers import PG_PASSWORD, REPO, sweep_24
from sqlalchemy import func, select

from db.models import Result, Sweep, SweepTrial, Trial
from orchestrator.cli import main
from orchestrator.records import TrialConfig
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
        hashes = s.scalar(
            select(func.count(func.distinct(Result.config_hash))).where(
                Result.trial_id.in_(members)
            )
        )
        trials = s.scalar(select(func.count()).select_from(Trial).where(Trial.id.in_(members)))
        done = s.scalar(
            select(func.count())
            .select_from(Trial)
            .where(Trial.id.in_(members), Trial.status == "done")
        )
        for cfg, h, rh in s.execute(
            select(Trial.config, Trial.config_hash, Result.config_hash)
            .join(Result)
            .where(Trial.id.in_(members))
        ):
            assert h == rh == TrialConfig.from_dict(cfg).config_hash  # stable through JSON
        per_trial = s.execute(
            select(Trial.id, func.count(Result.id))
            .outerjoin(Result, Result.trial_id == Trial.id)
            .where(Trial.id.in_(members))
            .group_by(Trial.id)
        ).all()
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


def _start_driver(url, *args):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", *args, "--db", url, "--executor", "local"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_results(proc, url, sweep, n, timeout=180):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None:
            assert proc.poll() is None, proc.communicate()
        try:
            got = _results(url, sweep)[0]
            if got >= n:
                return got
        except Exception:  # noqa: BLE001 - schema or sweep not there yet
            pass
        time.sleep(0.2)
    raise AssertionError("no progress")


def _status(url, sweep):
    return json.loads(_cli("status", sweep, "--db", url, "--format", "json").stdout)[0]


def test_sigkill_driver_then_ctrl_c_then_resume(db_url, tmp_path):
    """SIGKILL mid-sweep leaves running trials behind; `orch resume` takes them over (on
    SQLite, a first resume is stopped with Ctrl-C: exit 130, its trials in flight back to
    pending). The last resume ends with exactly one result per config."""
    spec = sweep_24(tmp_path / "k.yaml", name="kill24", max_new_tokens=12)
    proc = _start_driver(db_url, "submit", str(spec))
    try:
        _wait_results(proc, db_url, "kill24", 3)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        out, err = proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert PG_PASSWORD not in out + err
    killed = _results(db_url, "kill24")
    assert 3 <= killed[0] < 24, killed

    if db_url.startswith("sqlite"):  # (Ctrl-C handling does not depend on the backend)
        _ctrl_c_resume(db_url, killed[0])
    st = _status(db_url, "kill24")
    r = _cli("resume", "kill24", "--db", db_url, "--executor", "local")
    assert r.exit_code == 0, r.output
    assert f"ran {st['pending'] + st['running']} (" in r.output
    assert _results(db_url, "kill24") == (24, 24, 24, 24, [1])


def _ctrl_c_resume(db_url, before):
    proc = _start_driver(db_url, "resume", "kill24")
    try:
        _wait_results(proc, db_url, "kill24", before + 2)
        proc.send_signal(signal.SIGINT)
    finally:
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "left pending; run `orch resume kill24`" in err and PG_PASSWORD not in out + err
    st = _status(db_url, "kill24")
    assert (st["status"], st["running"]) == ("interrupted", 0)
    assert st["pending"] + st["done"] == 24 and st["done"] >= before + 2


def test_cancel_stops_a_running_driver(sqlite_url, tmp_path):
    from orchestrator.runner import RunOptions, submit

    spec = sweep_24(tmp_path / "c.yaml", name="cc24", max_new_tokens=12)
    outcome = {}
    driver = threading.Thread(
        target=lambda: outcome.update(
            s=submit(spec, sqlite_url, RunOptions(executor="local"), log=lambda _: None)
        )
    )
    driver.start()
    _wait_results(None, sqlite_url, "cc24", 2)
    r = _cli("cancel", "cc24", "--db", sqlite_url)
    assert r.exit_code == 0 and "pending trials cancelled" in r.stdout
    driver.join(timeout=120)
    assert outcome["s"].status == "cancelled" and outcome["s"].done < 24
    st = _status(sqlite_url, "cc24")
    assert (st["status"], st["running"], st["pending"]) == ("cancelled", 0, 0)
    assert st["cancelled"] == 24 - st["done"]
    r = _cli("resume", "--db", sqlite_url, "--executor", "local")  # the most recent sweep
    assert r.exit_code == 0, r.output
    assert _results(sqlite_url, "cc24") == (24, 24, 24, 24, [1])
