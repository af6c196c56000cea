"""The database layer on SQLite and on the real Postgres server: migrations, idempotent
submission, compare-and-set claims under leases, one result per config hash, cancel, sweep
statuses that follow their trials."""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
import time

import pytest
from sqlalchemy import func, select, text, update

from db import create_db_engine, current_revision, head_revision, upgrade
from db.models import Base, ModelInfo, Result, Sweep, Trial
from orchestrator.records import TrialFailure
from orchestrator.store import Store
from orchestrator.store.leases import LEASE_S, owner_alive, proc_stat
from orchestrator.store.sql import StoreError
from orchestrator.store.sweeps import CancelInfo
from tests.orchestrator.orch_helpers import fake_config, fake_result


def _count(store, model, *where):
    with store.Session() as s:
        return s.scalar(select(func.count()).select_from(model).where(*where))


def test_migrations_match_models(db_url):
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    engine = create_db_engine(db_url)
    assert current_revision(engine) is None
    assert upgrade(engine) == head_revision()
    assert upgrade(engine) == head_revision()  # idempotent
    with engine.connect() as c:
        assert compare_metadata(MigrationContext.configure(c), Base.metadata) == []
        if engine.dialect.name == "sqlite":
            assert c.execute(text("PRAGMA journal_mode")).scalar() == "wal"
    engine.dispose()


def test_connections_opening_a_new_sqlite_file_at_once(tmp_path):
    """The first connection switches a new file to WAL. SQLite does not always wait on the
    busy timeout while another connection is switching it, so openers racing on a fresh file
    failed with "database is locked" (about 7% of these rounds before openers retried the
    switch)."""
    import threading

    errors = []

    def connect(url):
        try:
            create_db_engine(url).dispose()
        except Exception as e:  # noqa: BLE001 - collected and asserted below
            errors.append(str(e))

    for i in range(200):
        url = f"sqlite:///{tmp_path / f'{i}.db'}"
        threads = [threading.Thread(target=connect, args=(url,)) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []


def test_reading_an_empty_sqlite_file_writes_nothing_to_it(tmp_path):
    """status, query and db current on a 0-byte file: one error line (or "current (empty)"),
    and the file stays 0 bytes (the reader does not switch it to WAL)."""
    from click.testing import CliRunner

    from orchestrator.cli import main

    empty = tmp_path / "empty.db"
    empty.touch()
    url = f"sqlite:///{empty}"
    for args in (["status"], ["query", "--best-by", "speedup"], ["export"]):
        r = CliRunner().invoke(main, [*args, "--db", url])
        assert r.exit_code == 2 and "has no orch tables yet" in r.stderr, r.output
    r = CliRunner().invoke(main, ["db", "current", "--db", url])
    assert r.exit_code == 0 and "current (empty)" in r.stdout, r.output
    assert empty.stat().st_size == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]


def test_old_schema_is_refused(sqlite_url):
    engine = create_db_engine(sqlite_url)
    upgrade(engine)
    with engine.begin() as c:
        c.execute(text("UPDATE alembic_version SET version_num = '0001'"))
    with pytest.raises(StoreError, match="run `orch db upgrade`"):
        Store(sqlite_url)


def test_submit_is_idempotent_and_tracks_the_spec(db_url):
    store = Store(db_url)
    trials = [fake_config(i) for i in range(1, 6)]
    a = store.submit("s", {"name": "s"}, trials, "v1")
    assert (a.total, a.new, a.done) == (5, 5, 0)
    b = store.submit("s", {"name": "s"}, trials, "v1")
    assert (b.sweep_id, b.total, b.new, b.done) == (a.sweep_id, 5, 0, 0)
    # another sweep sharing 2 configs reuses their rows
    c = store.submit("t", {"name": "t"}, trials[3:] + [fake_config(9)], "v1")
    assert (c.total, c.new) == (3, 1)
    assert _count(store, Trial) == 6
    # a smaller spec is refused (test_identity.py), or with replace shrinks the sweep's
    # trial set; rows another sweep holds stay, the others go
    d = store.submit("s", {"name": "s"}, trials[:2], "v2", replace=True)
    assert d.total == 2 and d.deleted == 1 and _count(store, Trial) == 5
    store.close()


def test_claims_results_failures_and_cancel(db_url):
    store = Store(db_url)
    trials = [fake_config(i) for i in range(1, 5)]
    sid = store.submit("s", {"name": "s"}, trials, "v").sweep_id
    store.begin_run(sid)
    jobs = store.runnable(sid)
    assert [c.config_hash for _, c, _ in jobs] == [t.config_hash for t in trials]
    (i1, c1, _), (i2, c2, _), (i3, _, _), (i4, _, _) = jobs
    assert store.mark_running(i1, "h", "0") and not Store(db_url).mark_running(i1, "h", "1")
    store.record_result(i1, fake_result(c1))
    dup = dataclasses.replace(fake_result(c1, throughput=5.0), host="other")
    store.record_result(i1, dup)  # a duplicate is ignored, with its worker and timing
    assert _count(store, Result) == 1
    assert _count(store, Result, Result.throughput == 100.0) == 1
    assert _count(store, Trial, Trial.worker_host == "testhost", Trial.status == "done") == 1
    assert _count(store, Trial, Trial.owner.is_not(None)) == 0  # a result ends the lease
    assert _count(store, ModelInfo) == 1
    assert store.mark_running(i2, "h", "0")
    failure = TrialFailure(
        c2.config_hash, "OutOfMemoryError: boom", "h", "0", time.time() - 1, time.time(), "n1"
    )
    assert not Store(db_url).record_failure(i2, failure)  # another driver: not its trial
    assert store.record_failure(i2, failure)
    assert _count(store, Trial, Trial.worker_node == "n1", Trial.status == "failed") == 1
    assert store.mark_running(i3, "h", "1")
    store.requeue(i3, "worker died")
    assert store.cancel("s") == CancelInfo(finished=False, cancelled=2, shared=0)  # i3, i4
    assert not store.mark_running(i4, "h", "0")  # cancelled meanwhile: skipped
    assert store.finish_run(sid) == "cancelled"
    row = store.counts("s")[0]
    assert (row["done"], row["failed"], row["cancelled"]) == (1, 1, 2)
    # resume: cancelled trials run again, failed ones only with retry_failed
    store.begin_run(sid)
    assert {i for i, _, _ in store.runnable(sid)} == {i3, i4}
    assert {i for i, _, _ in store.runnable(sid, retry_failed=True)} == {i2, i3, i4}
    failed = store.trials(sid, ("failed",))
    assert failed == []  # now pending again
    store.close()


def test_record_result_stores_the_worker_node(db_url):
    store = Store(db_url)
    cfg = fake_config(1)
    sid = store.submit("s", {"name": "s"}, [cfg], "v").sweep_id
    ((tid, _, _),) = store.runnable(sid)
    assert store.mark_running(tid, "h", None)
    store.record_result(tid, dataclasses.replace(fake_result(cfg), node="ab12" * 14))
    assert _count(store, Trial, Trial.worker_node == "ab12" * 14) == 1
    store.close()


def _lease(store, tid):
    with store.Session() as s:
        return s.execute(select(Trial.owner, Trial.lease_until).where(Trial.id == tid)).one()


def _set_lease(store, tid, owner, lease_until):
    with store.Session.begin() as s:
        s.execute(
            update(Trial)
            .where(Trial.id == tid)
            .values(status="running", owner=owner, lease_until=lease_until)
        )


def test_leases_keep_trials_of_live_drivers_and_expire(db_url):
    """A second driver on the sweep gets only what the first does not hold; heartbeats renew
    the leases; a lease that ran out (no heartbeat) hands the trial over, and the first
    driver's late failure no longer counts."""
    a, b = Store(db_url), Store(db_url, lease_s=5)
    assert a.owner != b.owner and a.owner.startswith(f"{socket.gethostname()}:{os.getpid()}:")
    trials = [fake_config(i) for i in range(1, 4)]
    sid = a.submit("s", {"name": "s"}, trials, "v").sweep_id
    (t1, c1, _), (t2, _, _), (t3, _, _) = a.runnable(sid)
    assert a.mark_running(t1, "h", None) and b.mark_running(t2, "h", None)
    assert not b.mark_running(t1, "h", None) and not a.mark_running(t2, "h", None)
    assert [i for i, _, _ in b.runnable(sid)] == [t3] == [i for i, _, _ in a.runnable(sid)]
    assert a.running_elsewhere(sid) == 1 == b.running_elsewhere(sid)
    owner, until = _lease(a, t1)
    assert owner == a.owner and 30 < until - a.clock() <= 60  # (a loaded machine is slow)
    time.sleep(0.05)
    a.heartbeat(sid)
    assert _lease(a, t1)[1] > until
    _set_lease(a, t1, a.owner, a.clock() - 1)  # a stopped heartbeating a minute ago
    assert [i for i, _, _ in b.runnable(sid)] == [t1, t3]
    assert _lease(a, t1) == (None, None)
    assert b.mark_running(t1, "h", None)
    assert not a.record_failure(t1, TrialFailure(c1.config_hash, "late", "h", None, 0.0, 1.0))
    assert not a.mark_running(t1, "h", None)
    a.reset_running([t1])  # not a's any more: stays b's
    assert _lease(a, t1)[0] == b.owner
    b.record_result(t1, fake_result(c1))
    assert _count(a, Trial, Trial.id == t1, Trial.status == "done") == 1
    a.close(), b.close()


def test_a_dead_or_reused_pid_loses_its_trials_at_once(sqlite_url):
    """Owners on this host are checked against their process: gone, or a pid now used by a
    process that started at another time (PID reuse), loses its trials before the lease runs
    out; a live owner, or one on another host, keeps them until then."""
    store = Store(sqlite_url)
    trials = [fake_config(i) for i in range(1, 6)]
    sid = store.submit("s", {"name": "s"}, trials, "v").sweep_id
    ids = [i for i, _, _ in store.runnable(sid)]
    host = socket.gethostname()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        start = proc_stat(live.pid)[1]
        later = store.clock() + 600
        owners = [
            f"{host}:{live.pid}:{start}:aa",  # alive: kept
            f"{host}:{live.pid}:{int(start) + 1}:bb",  # that pid, another process: taken
            f"{host}:{dead.pid}:{start}:cc",  # gone: taken
            "elsewhere:1:1:dd",  # another host, live lease: kept
            "elsewhere:1:1:ee",  # another host, lease ran out: taken
        ]
        for tid, owner in zip(ids, owners):
            _set_lease(store, tid, owner, later)
        _set_lease(store, ids[4], owners[4], store.clock() - 1)
        assert owner_alive(owners[0]) and owner_alive(owners[3])
        assert not owner_alive(owners[1]) and not owner_alive(owners[2])
        assert [i for i, _, _ in store.runnable(sid)] == [ids[1], ids[2], ids[4]]
        assert store.running_elsewhere(sid) == 2
    finally:
        live.kill()
        live.wait()
    assert [i for i, _, _ in store.runnable(sid)] == ids[:3] + ids[4:]
    store.close()


def test_sweep_status_follows_its_trials(db_url):
    """x and y share configs 2 and 3. A driver of y finishes them; x is finished the moment
    its last trial is recorded, by whichever driver. A sweep made of finished configs is
    finished at once; cancelling a finished sweep changes nothing; cancelling a sweep leaves
    pending the trials another live sweep holds."""
    a, b = Store(db_url), Store(db_url)
    cfg = {i: fake_config(i) for i in range(1, 6)}
    x = a.submit("x", {"name": "x"}, [cfg[1], cfg[2], cfg[3]], "v").sweep_id
    y = b.submit("y", {"name": "y"}, [cfg[2], cfg[3], cfg[4]], "v").sweep_id
    b.begin_run(y)
    for tid, c, _ in b.runnable(y):
        assert b.mark_running(tid, "h", None)
        b.record_result(tid, fake_result(c))
    assert b.finish_run(y) == "finished" and a.sweep_status(x) == "submitted"
    a.begin_run(x)
    ((t1, c1, _),) = a.runnable(x)
    assert a.mark_running(t1, "h", None)
    assert a.finish_run(x) == "interrupted"  # (t1 still running: a is stopping)
    a.record_result(t1, fake_result(c1))
    assert a.sweep_status(x) == "finished"
    assert a.submit("z", {"name": "z"}, [cfg[2], cfg[4]], "v").done == 2
    assert a.sweep_status(a.sweep("z")["id"]) == "finished"
    assert a.cancel("x") == CancelInfo(finished=True, cancelled=0, shared=0)
    assert a.sweep_status(x) == "finished"
    grown = a.submit("z", {"name": "z"}, [cfg[2], cfg[4], cfg[5]], "v", replace=True).sweep_id
    assert a.sweep_status(grown) == "submitted"
    a.submit("w", {"name": "w"}, [cfg[5]], "v")
    assert a.cancel("z") == CancelInfo(finished=False, cancelled=0, shared=1)
    assert a.cancel("w") == CancelInfo(finished=False, cancelled=1, shared=0)
    assert {r["sweep"]: r["status"] for r in a.counts()} == {
        "x": "finished",
        "y": "finished",
        "z": "cancelled",
        "w": "cancelled",
    }
    a.close(), b.close()


def test_two_drivers_leaving_a_sweep(db_url):
    """The first of two drivers to stop leaves the sweep running while the other
    heartbeats it; a sweep whose driver was killed shows as interrupted once its heartbeat
    is a lease old."""
    a, b = Store(db_url), Store(db_url)
    sid = a.submit("s", {"name": "s"}, [fake_config(1)], "v").sweep_id
    a.begin_run(sid)
    b.begin_run(sid)
    a.heartbeat(sid)
    assert b.finish_run(sid) == "running"
    assert a.finish_run(sid) == "interrupted"
    b.heartbeat(sid)  # b is still on it after all
    assert a.counts("s")[0]["status"] == "running"
    with a.Session.begin() as s:
        s.execute(update(Sweep).values(heartbeat_at=a.clock() - LEASE_S - 1))
    assert (a.counts("s")[0]["status"], a.counts("s")[0]["driver"]) == ("interrupted", None)
    assert a.sweep_status(sid) == "running"  # as stored: the next driver settles it
    a.close(), b.close()


def test_unreachable_and_bad_urls_are_one_line_without_password(tmp_path):
    for url, needle in [
        ("postgresql+psycopg://alice:S3cretPw@127.0.0.1:1/orch", "cannot connect to database"),
        (f"sqlite:///{tmp_path}/missing/dir/orch.db", "does not exist"),
        ("nonsense://", "unsupported database nonsense://"),
        ("::::", "invalid database URL"),
    ]:
        with pytest.raises(StoreError) as e:
            Store(url)
        msg = str(e.value)
        assert needle in msg and "\n" not in msg and "S3cretPw" not in msg, msg


def test_orch_db_upgrade_and_current(db_url):
    from click.testing import CliRunner

    from orchestrator.cli import main
    from tests.orchestrator.orch_helpers import PG_PASSWORD

    r = CliRunner().invoke(main, ["db", "current", "--db", db_url])
    if db_url.startswith("sqlite"):  # a read-only command does not create the file
        assert r.exit_code == 2 and "no database file" in r.stderr
    else:
        assert r.exit_code == 0 and "current (empty)" in r.stdout
    for _ in range(2):
        r = CliRunner().invoke(main, ["db", "upgrade", "--db", db_url])
        assert r.exit_code == 0 and f"is at revision {head_revision()}" in r.stdout
        assert PG_PASSWORD not in r.output
    r = CliRunner().invoke(main, ["db", "current", "--db", db_url])
    assert f"current {head_revision()}; head {head_revision()}" in r.stdout


def test_a_failed_trials_error_line_is_its_exception():
    """`orch status` shows one line per failed trial: the exception's, not the last line of
    what followed it (Ray's OutOfMemoryError ends with pages of memory statistics)."""
    from orchestrator.store.reads import error_line

    oom = (
        'Traceback (most recent call last):\n  File "w.py", line 3, in get\n    raise value\n'
        "ray.exceptions.OutOfMemoryError: 1 worker(s) were killed due to the node running low"
        " on memory.\nOOM kill reason: Memory usage exceeded threshold\nEviction Stats:\n"
        "Refer to the documentation on how to address the out of memory issue: https://x."
    )
    assert error_line(oom).startswith("ray.exceptions.OutOfMemoryError: 1 worker(s) were killed")
    task = "ray.exceptions.RayTaskError(ValueError): ray::TrialActor.run()\nValueError: bad B"
    assert error_line(task) == "ValueError: bad B"  # the last exception line
    assert error_line("worker died\n  (no traceback)") == "(no traceback)"
    assert error_line("Traceback:\nKeyboardInterrupt: x") == "KeyboardInterrupt: x"
    assert error_line(None) == "" and error_line("") == ""
