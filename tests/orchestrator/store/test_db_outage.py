"""A database that goes away under a running driver (orchestrator.store.Store.transact):
lost connections and lost commit acknowledgements are retried without running a trial twice;
a Postgres "restart" (every connection dropped through a proxy, new ones refused for a while)
mid-sweep does not kill the driver; an outage longer than the retry budget stops it with one
line, and the sweep resumes with nothing lost. The outages are placed at fixed points of the
run (the fake executor's steps, a given commit), not at random times."""

from __future__ import annotations

import itertools
import threading

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.engine import make_url

from db.models import Result, Trial
from orchestrator.run import runner
from orchestrator.store import Store
from orchestrator.store.sql import StoreError
from tests.orchestrator.driver_proc import FakeExecutor, executions, use_fake_executor
from tests.orchestrator.orch_helpers import PG_PASSWORD, fake_config
from tests.orchestrator.pg_proxy import PgProxy

CONFIGS = [fake_config(i) for i in range(8)]
HASHES = {c.config_hash for c in CONFIGS}


def _error(store, text="server closed the connection unexpectedly"):
    """A lost-connection error as the store's database driver raises it (SQLite's own kind)."""
    if store.dialect == "sqlite":
        text = "disk I/O error"
    return store.engine.dialect.loaded_dbapi.OperationalError(text)


def _run(store, log, monkeypatch, on_step=None, delay=0.0, lease_s=60.0):
    sweep_id = store.sweep("s")["id"]
    use_fake_executor(FakeExecutor(delay, str(log), on_step), monkeypatch.setattr)
    opts = runner.RunOptions(executor="fake", progress=False, lease_s=lease_s)
    return runner.run_sweep(store, sweep_id, opts, log=lambda line: None)


def _results(url):
    store = Store(url)
    with store.Session() as s:
        n = s.scalar(select(func.count()).select_from(Result))
        hashes = set(s.scalars(select(Result.config_hash)))
        not_done = s.scalar(select(func.count()).where(Trial.status != "done"))
    store.close()
    return n, hashes, not_done


def test_transact_names_the_operation_and_rolls_back(db_url):
    store = Store(db_url)
    store.submit("s", {"name": "s"}, CONFIGS[:1], "v")

    def half_then_fail(s):
        s.execute(Trial.__table__.update().values(status="done"))
        s.execute(select(func.no_such_function()))

    with pytest.raises(StoreError) as e:
        store.transact("doing half a thing", half_then_fail)
    assert str(e.value).startswith(f"doing half a thing in {store.display_url} failed: ")
    assert "\n" not in str(e.value) and PG_PASSWORD not in str(e.value)
    assert _results(db_url)[2] == 1  # rolled back: the trial is not done
    store.close()


def test_lost_connections_are_retried_then_reported(db_url):
    """Statements fail as if the connection dropped: retried with backoff until they
    succeed; with no budget left, one line naming the operation and the outage."""
    told = []
    store = Store(db_url, retry_s=30, on_retry=told.append)
    sweep_id = store.submit("s", {"name": "s"}, CONFIGS, "v").sweep_id
    failures = itertools.count()

    @event.listens_for(store.engine, "before_cursor_execute")
    def drop(*args):
        if next(failures) < 4:
            raise _error(store)

    assert len(store.runnable(sweep_id)) == len(CONFIGS)
    assert [t.split(": ")[0] for t in told] == ["finding runnable trials"] * 2
    assert "retrying for up to" in told[0] and "database back after" in told[1]
    failures = itertools.count()
    store.retry_s = 0.3
    with pytest.raises(StoreError) as e:
        store.runnable(sweep_id)
    msg = str(e.value)
    prefix = f"finding runnable trials in {store.display_url} failed after retrying for 0.3s: "
    assert msg.startswith(prefix) and "\n" not in msg and PG_PASSWORD not in msg
    store.close()


def test_lost_commit_acknowledgements_run_nothing_twice(db_url, tmp_path, monkeypatch):
    """Every third commit goes through but its acknowledgement is lost (the error comes
    after the commit): claims, results and sweep updates are retried, and each one is safe
    to repeat, so every trial still runs once and is recorded once."""
    store = Store(db_url, retry_s=30)
    store.submit("s", {"name": "s"}, CONFIGS, "v")
    commit, commits = store.engine.dialect.do_commit, itertools.count(1)

    def lossy_commit(dbapi_connection):
        commit(dbapi_connection)
        if next(commits) % 3 == 0:
            raise _error(store)

    monkeypatch.setattr(store.engine.dialect, "do_commit", lossy_commit)
    s = _run(store, tmp_path / "runs.log", monkeypatch)
    assert next(commits) > 20  # the lossy commits were many
    assert (s.status, s.ran, s.done) == ("finished", 8, 8)
    assert executions(str(tmp_path / "runs.log")) == {h: 1 for h in HASHES}
    assert _results(db_url) == (8, HASHES, 0)
    store.close()


def test_postgres_restart_mid_sweep_is_ridden_out(pg_url, tmp_path, monkeypatch):
    """The driver talks to Postgres through a proxy. After the 3rd result the proxy drops
    every connection and refuses new ones for 2 s (the next claim waits it out); after the
    6th, it drops them at the moment the next transaction commits (the server rolls it back,
    the driver repeats it). The sweep finishes; every trial ran and was recorded once."""
    proxy = PgProxy()
    url = make_url(pg_url).set(port=proxy.port).render_as_string(hide_password=False)
    told = []
    store = Store(url, retry_s=60, on_retry=told.append)
    store.submit("s", {"name": "s"}, CONFIGS, "v")
    cut_at_commit = threading.Event()

    @event.listens_for(store.engine, "commit")
    def cut_before_commit(conn):
        if cut_at_commit.is_set():
            cut_at_commit.clear()
            proxy.cut()
            threading.Timer(1.0, proxy.restore).start()

    def outage(step, n):
        if (step, n) == ("recorded", 3):
            proxy.cut()
            threading.Timer(2.0, proxy.restore).start()
        if (step, n) == ("recorded", 6):
            cut_at_commit.set()

    try:
        s = _run(store, tmp_path / "runs.log", monkeypatch, on_step=outage)
    finally:
        store.close()
        proxy.close()
    assert proxy.cuts == 2 and not cut_at_commit.is_set()
    assert (s.status, s.ran, s.done) == ("finished", 8, 8)
    retries = [t for t in told if "retrying for up to" in t]
    # the driver's next operation after the outage waited it out: the claim of trial 4, or
    # a cancellation poll (runner.py stop_requested) when one fell due first (a loaded machine)
    first = ("claiming trial 4: ", "reading a sweep's status: ")
    assert len(retries) >= 2 and retries[0].startswith(first), retries
    assert len([t for t in told if "database back after" in t]) == len(retries)
    assert executions(str(tmp_path / "runs.log")) == {h: 1 for h in HASHES}
    assert _results(pg_url) == (8, HASHES, 0)


def test_an_outage_beyond_the_retry_budget_stops_the_driver_resumably(
    db_url, tmp_path, monkeypatch
):
    """The database goes away while the 3rd trial runs and stays away past the 1 s budget:
    the driver stops with one line naming what it was doing; its results so far are kept
    and the trial it had in flight stays claimed until its 2 s lease runs out. A resume
    then waits for that lease, runs the rest, and the sweep finishes with one result per
    config; only the trial whose result was lost ran twice."""
    log = tmp_path / "runs.log"
    store = Store(db_url, lease_s=2.0, retry_s=1.0)
    store.submit("s", {"name": "s"}, CONFIGS, "v")
    down = threading.Event()

    @event.listens_for(store.engine, "before_cursor_execute")
    def unreachable(*args):
        if down.is_set():
            raise _error(store)

    def outage(step, n):
        if (step, n) == ("claimed", 3):
            down.set()

    with pytest.raises(StoreError) as e:
        _run(store, log, monkeypatch, on_step=outage, lease_s=2.0)
    msg = str(e.value)
    prefix = f"recording the result of trial 3 in {store.display_url} failed after retrying for 1s"
    assert msg.startswith(prefix) and "\n" not in msg and PG_PASSWORD not in msg
    assert msg.endswith("1 trials in flight go back once their lease runs out; run `orch resume s`")
    down.clear()
    store.close()
    assert _results(db_url)[:2] == (2, {c.config_hash for c in CONFIGS[:2]})

    resumed = Store(db_url)
    s = _run(resumed, log, monkeypatch)
    resumed.close()
    assert (s.status, s.ran, s.done) == ("finished", 6, 6)
    assert executions(str(log)) == {c.config_hash: 2 if c is CONFIGS[2] else 1 for c in CONFIGS}
    assert _results(db_url) == (8, HASHES, 0)
