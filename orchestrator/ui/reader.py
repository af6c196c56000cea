"""The dashboard's one handle on the database: a read-only Store, each sweep's signature
(trial counts by status and the latest finish time), and answers cached per sweep until its
signature changes (a new result, a claimed or failed trial).

Nothing here writes: the Store is opened with mode="read" (no file, schema or migration is
created), and every query below is a SELECT.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import pandas as pd
from sqlalchemy import event, func, select

from db.models import Sweep, SweepTrial, Trial
from orchestrator.results import QueryError, load_frame
from orchestrator.store import Store

# answers kept per sweep (each key: a where filter, a page part); the oldest go first
CACHE_PER_SWEEP = 64
CACHED_SWEEPS = 32  # sweeps whose answers are kept; the least recently asked for go first


def read_only(engine) -> None:
    """Every new connection of `engine` refuses writes: SQLite's query_only, PostgreSQL's
    read-only transactions (a bug here would fail loudly instead of writing). A SQLite
    transaction here begins deferred: the store's BEGIN IMMEDIATE takes the write lock, which a
    query_only connection may not, and a reader has no use for (it would hold up the drivers)."""
    if engine.dialect.name == "sqlite":
        for fn in list(engine.dispatch.begin):
            event.remove(engine, "begin", fn)

        @event.listens_for(engine, "begin")
        def _on_begin(conn) -> None:
            conn.exec_driver_sql("BEGIN")

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:
        cur = dbapi_conn.cursor()
        if engine.dialect.name == "sqlite":
            cur.execute("PRAGMA query_only = ON")
        else:
            cur.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
            dbapi_conn.commit()
        cur.close()

    engine.dispose()  # the connection Store opened to check the database predates the hook


def version_of(sig: tuple) -> str:
    """A short token for a signature (what the pages poll and compare)."""
    return format(hash(sig) & 0xFFFFFFFF, "08x")


class Reader:
    """A read-only Store and the per-sweep cache of frames and answers built from it."""

    def __init__(self, url: str | None) -> None:
        self.store = Store(url, mode="read")
        read_only(self.store.engine)
        self._lock = threading.Lock()
        self._cache: dict[str, dict[Any, tuple]] = {}
        self._building: set[tuple[str, Any]] = set()

    @property
    def display_url(self) -> str:
        return self.store.display_url

    def close(self) -> None:
        self.store.close()

    def signatures(self) -> dict[str, tuple]:
        """Sweep name -> (sorted (status, count) pairs, latest finished_at): what changes
        whenever a trial of the sweep is claimed, finishes or fails."""
        q = (
            select(Sweep.name, Trial.status, func.count(), func.max(Trial.finished_at))
            .join(SweepTrial, SweepTrial.sweep_id == Sweep.id)
            .join(Trial, Trial.id == SweepTrial.trial_id)
            .group_by(Sweep.name, Trial.status)
        )
        rows = self.store.transact("reading sweep signatures", lambda s: s.execute(q).all())
        out: dict[str, list] = {}
        for name, status, n, last in rows:
            out.setdefault(name, []).append((str(status), int(n), float(last or 0)))
        return {k: tuple(sorted(v)) for k, v in out.items()}

    def signature(self, name: str) -> tuple:
        """One sweep's signature (its name must exist: StoreError otherwise)."""
        sig = self.signatures().get(name)
        if sig is None:
            self.store.sweep(name)  # raises for an unknown sweep
            return ()
        return sig

    def cached(
        self,
        name: str,
        key: Any,
        build: Callable[[], Any],
        sig: tuple | None = None,
        hold: bool = True,
    ):
        """build() once per sweep `name`, `key` and signature. Once the sweep changed, an
        answer built before is served at once while its successor is built in the background
        (`hold`; each answer carries the version it was built from, and a page polls until it
        has the current one), so a page never waits on a sweep that changes every second.
        `hold` False: always the current signature's answer (what other answers are built
        from, downloads)."""
        sig = self.signature(name) if sig is None else sig
        with self._lock:
            self._cache[name] = self._cache.pop(name, {})  # the most recently asked for: last
            held = self._cache[name].get(key)
            if held is not None and held[0] == sig:
                return held[1]
            if hold and held is not None:
                if (name, key) not in self._building:
                    self._building.add((name, key))
                    threading.Thread(
                        target=self._rebuild, args=(name, key, build, sig), daemon=True
                    ).start()
                return held[1]
        return self._store(name, key, sig, build())

    def _store(self, name: str, key: Any, sig: tuple, value: Any) -> Any:
        with self._lock:
            answers = self._cache.setdefault(name, {})
            answers.pop(key, None)
            answers[key] = (sig, value)
            while len(answers) > CACHE_PER_SWEEP:
                answers.pop(next(iter(answers)))
            while len(self._cache) > CACHED_SWEEPS:
                self._cache.pop(next(iter(self._cache)))
        return value

    def _rebuild(self, name: str, key: Any, build: Callable[[], Any], sig: tuple) -> None:
        try:
            self._store(name, key, sig, build())
        except Exception:  # noqa: BLE001 - the next request builds it again and says why
            with self._lock:
                self._cache.get(name, {}).pop(key, None)
        finally:
            with self._lock:
                self._building.discard((name, key))

    def frame(self, name: str, sig: tuple | None = None) -> pd.DataFrame | None:
        """The results frame of sweep `name` (load_frame with per-prompt data, so with its
        intervals and certificates: what orch query and compare read); None before any
        trial finished."""

        def build():
            try:
                return load_frame(self.store, name, per_prompt=True)
            except QueryError:
                return None

        return self.cached(name, "frame", build, sig, hold=False)

    def sweep_rows(self) -> list[dict[str, Any]]:
        """Every sweep's stored row (name, description, spec, code version, driver, times)."""
        cols = [c for c in Sweep.__table__.columns if c.name != "only"]
        q = select(*cols).order_by(Sweep.updated_at.desc(), Sweep.id.desc())
        rows = self.store.transact("reading sweeps", lambda s: s.execute(q).mappings().all())
        return [dict(r) for r in rows]

    def trial_rows(self, name: str, columns: list, where=None) -> list[dict[str, Any]]:
        """Selected columns of sweep `name`'s trials (any status), optionally filtered."""
        members = (
            select(SweepTrial.trial_id)
            .join(Sweep, Sweep.id == SweepTrial.sweep_id)
            .where(Sweep.name == name)
        )
        q = select(*columns).where(Trial.id.in_(members)).order_by(Trial.id)
        if where is not None:
            q = q.where(where)
        return [
            dict(r)
            for r in self.store.transact("reading trials", lambda s: s.execute(q).mappings().all())
        ]
