"""A 24-config sweep on the tiny models end to end, on SQLite and on the real Postgres server:
it completes, resubmitting runs nothing, two drivers share it, and a driver killed with
SIGKILL mid-sweep is finished by `orch resume` with exactly one result per config. Drivers
are held at a chosen trial through the ORCH_TEST_PAUSE hook, so that a kill, a Ctrl-C or a
second driver lands at a known point whatever the machine's load."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

from click.testing import CliRunner
from sqlalchemy import func, select

from db.models import Result, Sweep, SweepStatus, SweepTrial, Trial
from orchestrator.cli import main
from orchestrator.records import TrialConfig
from orchestrator.run.runner import PAUSE_ENV
from orchestrator.store import DB_RETRY_S, Store
from orchestrator.store.leases import LEASE_S
from tests.orchestrator.orch_helpers import PG_PASSWORD, REPO, sweep_24


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
    r = _cli("cancel", "tiny24", "--db", db_url)
    assert r.exit_code == 0 and r.output == "sweep 'tiny24' is finished: nothing to cancel\n"
    assert _status(db_url, "tiny24")["status"] == "finished"


def test_lease_and_retry_options(sqlite_url, tmp_path, monkeypatch):
    """--lease-s and --db-retry-s reach the run (their help shows the store's defaults)."""
    import orchestrator.run.runner as runner

    help_text = " ".join(_cli("submit", "--help").output.split())
    assert f"[default: {LEASE_S:g}]" in help_text and f"[default: {DB_RETRY_S:g}]" in help_text
    seen = []
    summary = runner.RunSummary("x", 0, 0, 0, 0, 0, 0, SweepStatus.FINISHED, 0.0)
    monkeypatch.setattr(runner, "resume", lambda name, url, opts, log: seen.append(opts) or summary)
    r = _cli("resume", "x", "--db", sqlite_url, "--lease-s", "7.5", "--db-retry-s", "0")
    assert r.exit_code == 0 and (seen[0].lease_s, seen[0].db_retry_s) == (7.5, 0.0)
    _cli("resume", "x", "--db", sqlite_url)
    assert (seen[1].lease_s, seen[1].db_retry_s) == (LEASE_S, DB_RETRY_S)
    r = _cli("resume", "x", "--db", sqlite_url, "--lease-s", "0.5")
    assert r.exit_code == 2 and "--lease-s" in r.output
    # nan passes click's FloatRange (every comparison is false): refused as the option's own
    # one line, not the store's "lease (nans)" message, nor a retry that never happens
    for flag in ("--lease-s", "--db-retry-s"):
        for value in ("nan", "inf"):
            r = _cli("resume", "x", "--db", sqlite_url, flag, value)
            assert r.exit_code == 2, (flag, value, r.output)
            assert (
                r.output == f"error: Invalid value for '{flag}': {value} is not a finite number\n"
            )
    assert len(seen) == 2


def _start_driver(url, *args, pause=None):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if pause is not None:
        env[PAUSE_ENV] = pause
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", *args, "--db", url, "--executor", "local"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_as_from_a_terminal,
    )


def _as_from_a_terminal() -> None:
    """In the driver's child process before exec: Ctrl-C reaches it even where this test
    process ignores or blocks SIGINT (an earlier test's library may have; a child keeps both
    across exec, and Python then never raises KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


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


def _wait_paused(proc, path, timeout=300):
    """Until the driver holds at its pause point (it created `path`)."""
    deadline = time.time() + timeout
    while not path.exists():
        if proc is not None:
            assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline, "the driver never reached its pause point"
        time.sleep(0.05)


def test_two_drivers_share_a_sweep(db_url, tmp_path):
    """The first driver is held on its first trial; a second driver on the same sweep runs
    the other 23, then waits for the held one instead of leaving the sweep unfinished. Both
    exit 0 with the sweep finished."""
    spec = sweep_24(tmp_path / "two.yaml", name="two24")
    pause = tmp_path / "paused"
    first = _start_driver(db_url, "submit", str(spec), pause=f"1:{pause}")
    second = None
    try:
        _wait_paused(first, pause)
        second = _start_driver(db_url, "submit", str(spec))
        _wait_results(second, db_url, "two24", 23)
        time.sleep(1.0)
        assert second.poll() is None  # waiting for the held trial
        assert _status(db_url, "two24")["running"] == 1
        pause.unlink()
        outs = [p.communicate(timeout=300) for p in (first, second)]
    finally:
        for p in (first, second):
            if p is not None and p.poll() is None:
                p.kill()
    assert (first.returncode, second.returncode) == (0, 0), outs
    assert "ran 1 (1 done" in outs[0][0] and "ran 23 (23 done" in outs[1][0]
    assert all("status finished" in out for out, _ in outs)
    assert "waiting for 1 trials that other drivers are running" in outs[1][1]
    assert _results(db_url, "two24") == (24, 24, 24, 24, [1])
    assert _status(db_url, "two24")["status"] == "finished"


def test_sigkill_driver_then_ctrl_c_then_resume(db_url, tmp_path):
    """A driver killed with SIGKILL while it runs its 4th trial leaves 3 results and that
    trial running under its lease; `orch resume` takes it over at once (the owner process is
    gone). On SQLite a first resume is stopped with Ctrl-C while it runs its 3rd trial: exit
    130, that trial back to pending. The last resume ends with one result per config."""
    spec = sweep_24(tmp_path / "k.yaml", name="kill24", max_new_tokens=12)
    pause = tmp_path / "paused"
    proc = _start_driver(db_url, "submit", str(spec), pause=f"4:{pause}")
    try:
        _wait_paused(proc, pause)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        out, err = proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert PG_PASSWORD not in out + err
    st = _status(db_url, "kill24")
    assert (st["done"], st["running"], st["pending"]) == (3, 1, 20)
    assert _results(db_url, "kill24")[0] == 3

    if db_url.startswith("sqlite"):  # (Ctrl-C handling does not depend on the backend)
        _ctrl_c_resume(db_url, tmp_path / "paused2")
    r = _cli("resume", "kill24", "--db", db_url, "--executor", "local")
    assert r.exit_code == 0, r.output
    left = 19 if db_url.startswith("sqlite") else 21
    assert f"ran {left} (" in r.output and "status finished" in r.output
    assert _results(db_url, "kill24") == (24, 24, 24, 24, [1])


def _ctrl_c_resume(db_url, pause):
    proc = _start_driver(db_url, "resume", "kill24", pause=f"3:{pause}")
    try:
        _wait_paused(proc, pause)
        proc.send_signal(signal.SIGINT)
    finally:
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "19 trials of sweep 'kill24' left pending; run `orch resume kill24`" in err
    assert PG_PASSWORD not in out + err
    st = _status(db_url, "kill24")
    assert (st["status"], st["running"], st["pending"], st["done"]) == ("interrupted", 0, 19, 5)


def test_cancel_stops_a_running_driver(sqlite_url, tmp_path, monkeypatch):
    from orchestrator.run.runner import RunOptions, submit

    spec = sweep_24(tmp_path / "c.yaml", name="cc24", max_new_tokens=12)
    pause = tmp_path / "paused"
    monkeypatch.setenv(PAUSE_ENV, f"3:{pause}")
    outcome = {}
    driver = threading.Thread(
        target=lambda: outcome.update(
            s=submit(spec, sqlite_url, RunOptions(executor="local"), log=lambda _: None)
        )
    )
    driver.start()
    _wait_paused(None, pause)
    r = _cli("cancel", "cc24", "--db", sqlite_url)
    assert r.exit_code == 0 and "cancelled sweep 'cc24': 21 pending trials cancelled" in r.stdout
    pause.unlink()
    driver.join(timeout=120)
    assert outcome["s"].status == "cancelled" and outcome["s"].done == 3
    st = _status(sqlite_url, "cc24")
    assert (st["status"], st["running"], st["pending"]) == ("cancelled", 0, 0)
    assert (st["cancelled"], st["done"]) == (21, 3)
    monkeypatch.delenv(PAUSE_ENV)
    r = _cli("resume", "--db", sqlite_url, "--executor", "local")  # the most recent sweep
    assert r.exit_code == 0, r.output
    assert _results(sqlite_url, "cc24") == (24, 24, 24, 24, [1])
