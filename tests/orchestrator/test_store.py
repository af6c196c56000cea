"""The database layer on SQLite and on the real Postgres server: migrations, idempotent
submission, compare-and-set claims, one result per config hash, cancel, driver claims."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time

import pytest
from orch_helpers import fake_config, fake_result
from sqlalchemy import func, select, text

from db import create_db_engine, current_revision, head_revision, upgrade
from db.models import Base, ModelInfo, Result, Trial
from orchestrator.records import TrialFailure
from orchestrator.store import Store, StoreError


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
    # a smaller spec shrinks the sweep's trial set; rows stay
    d = store.submit("s", {"name": "s"}, trials[:2], "v2")
    assert d.total == 2 and _count(store, Trial) == 6
    store.close()


def test_claims_results_failures_and_cancel(db_url):
    store = Store(db_url)
    trials = [fake_config(i) for i in range(1, 5)]
    sid = store.submit("s", {"name": "s"}, trials, "v").sweep_id
    store.claim_driver(sid)
    jobs = store.runnable(sid)
    assert [c.config_hash for _, c, _ in jobs] == [t.config_hash for t in trials]
    (i1, c1, _), (i2, c2, _), (i3, _, _), (i4, _, _) = jobs
    assert store.mark_running(i1, "h", "0") and not store.mark_running(i1, "h", "1")
    store.record_result(i1, fake_result(c1))
    dup = dataclasses.replace(fake_result(c1, throughput=5.0), host="other")
    store.record_result(i1, dup)  # a duplicate is ignored, with its worker and timing
    assert _count(store, Result) == 1
    assert _count(store, Result, Result.throughput == 100.0) == 1
    assert _count(store, Trial, Trial.worker_host == "testhost", Trial.status == "done") == 1
    assert _count(store, ModelInfo) == 1
    assert store.mark_running(i2, "h", "0")
    store.record_failure(
        i2,
        TrialFailure(
            c2.config_hash, "OutOfMemoryError: boom", "h", "0", time.time() - 1, time.time()
        ),
    )
    assert store.mark_running(i3, "h", "1")
    store.requeue(i3, "worker died")
    assert store.cancel("s") == 2  # i3 (requeued) and i4 were pending
    assert not store.mark_running(i4, "h", "0")  # cancelled meanwhile: skipped
    assert store.release_driver(sid) == "cancelled"
    row = store.counts("s")[0]
    assert (row["done"], row["failed"], row["cancelled"]) == (1, 1, 2)
    # resume: cancelled trials run again, failed ones only with retry_failed
    store.claim_driver(sid)
    assert {i for i, _, _ in store.runnable(sid)} == {i3, i4}
    assert {i for i, _, _ in store.runnable(sid, retry_failed=True)} == {i2, i3, i4}
    failed = store.trials(sid, ("failed",))
    assert failed == []  # now pending again
    store.close()


def test_a_live_driver_blocks_a_second_one(sqlite_url):
    store = Store(sqlite_url)
    sid = store.submit("s", {"name": "s"}, [fake_config(1)], "v").sweep_id
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        from orchestrator.store import Sweep

        with store.Session.begin() as s:
            row = s.get(Sweep, sid)
            row.driver, row.status, row.heartbeat_at = (
                f"{os.uname().nodename}:{other.pid}",
                "running",
                time.time(),
            )
        with pytest.raises(StoreError, match="is being run by driver"):
            store.claim_driver(sid)
        with pytest.raises(StoreError, match="is being run by driver"):
            store.check_driver("s")  # what `orch submit` asks before writing anything
        store.claim_driver(sid, force=True)
        with store.Session.begin() as s:
            s.get(Sweep, sid).driver = f"{os.uname().nodename}:{other.pid}"
    finally:
        other.kill()
        other.wait()
    store.claim_driver(sid)  # its driver is dead now
    store.close()


def test_unreachable_and_bad_urls_are_one_line_without_password(tmp_path):
    for url, needle in [
        ("postgresql+psycopg://alice:S3cretPw@127.0.0.1:1/orch", "cannot connect to database"),
        (f"sqlite:///{tmp_path}/missing/dir/orch.db", "does not exist"),
        ("nonsense://", "cannot use database"),
        ("::::", "invalid database URL"),
    ]:
        with pytest.raises(StoreError) as e:
            Store(url)
        msg = str(e.value)
        assert needle in msg and "\n" not in msg and "S3cretPw" not in msg, msg


def test_orch_db_upgrade_and_current(db_url):
    from click.testing import CliRunner
    from orch_helpers import PG_PASSWORD

    from orchestrator.cli import main

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
