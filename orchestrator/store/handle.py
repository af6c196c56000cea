"""Driver-side database operations (only drivers write; workers return results).

`Store` is one driver's handle on the database: its connection, its driver id and lease, and
the methods every command calls. Each method runs one plain function over a Session in one
`Store.transact` call; the functions live by concern: sweeps.py (submit, cancel, delete
results), trials.py (a driver's run: claims under leases, heartbeats, recording outcomes),
reads.py (queries), settle.py (when a sweep is finished) and sql.py (what they share:
StoreError, the clock, inserts).

Every database access goes through `Store.transact`: one short transaction, rolled back on
any error, a database error turned into one line naming the operation (StoreError). A lost
connection (server restarted, network) is retried with backoff for up to `retry_s` seconds
first, so a driver rides out a short outage; every write is therefore safe to repeat (a commit
whose acknowledgement was lost is retried too). Postgres resolving a deadlock (possible when
overlapping sweeps are submitted at once with their shared configs in different orders) counts
as such an error: the aborted transaction is retried.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any, Callable, TypeVar

from sqlalchemy import select
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import Session

from db.migrate import ensure_schema
from db.models import SweepStatus, TrialStatus
from db.session import (
    DatabaseError,
    create_db_engine,
    describe_error,
    redact,
    resolve_url,
    session_factory,
)
from orchestrator.only import Only
from orchestrator.records import TrialConfig, TrialFailure, TrialResult
from orchestrator.store import labels as store_labels
from orchestrator.store import reads as store_reads
from orchestrator.store import sweeps as store_sweeps
from orchestrator.store import trials as store_trials
from orchestrator.store.leases import HEARTBEAT_S, LEASE_S, new_driver_id
from orchestrator.store.sql import StoreError, now
from orchestrator.store.sweeps import CancelInfo, SubmitInfo

DB_RETRY_S = 300.0  # how long a driver retries a lost database before it stops
RETRY_FIRST_S, RETRY_MAX_S = 0.1, 5.0  # backoff between retries: doubling, capped

T = TypeVar("T")


class Store:
    """One driver's database handle; each method below is one transaction (`transact`) over
    a function of sweeps.py, trials.py or reads.py, given this driver's id and
    lease where it needs them."""

    def __init__(
        self,
        url: str | None = None,
        mode: str = "create",
        lease_s: float = LEASE_S,
        retry_s: float = 0.0,
        on_retry: Callable[[str], None] | None = None,
    ) -> None:
        """`mode`: "create" (submit: a new SQLite file and the schema are created), "write"
        (resume, cancel: the database must exist and be writable) or "read" (status, query,
        ...: the database must exist; nothing is created)."""
        if mode not in ("create", "write", "read"):
            raise ValueError(f"unknown store mode {mode!r}")
        if not lease_s > 0 or retry_s < 0:
            raise StoreError(
                f"lease ({lease_s}s) must be positive, retry ({retry_s}s) not negative"
            )
        try:
            self.url = resolve_url(url)
            self.engine = create_db_engine(
                self.url, must_exist=mode != "create", writable=mode != "read"
            )
            ensure_schema(self.engine, create=mode == "create")
        except DatabaseError as e:
            raise StoreError(str(e)) from None
        except SQLAlchemyError as e:
            raise StoreError(
                f"database {redact(self.url)}: {describe_error(e, self.url)}"
            ) from None
        self.Session = session_factory(self.engine)
        self.dialect = self.engine.dialect.name
        self.owner = new_driver_id()
        self.lease_s, self.retry_s, self.on_retry = lease_s, retry_s, on_retry
        self._models_seen: set[str] = set()

    @property
    def display_url(self) -> str:
        return redact(self.url)

    @property
    def heartbeat_s(self) -> float:
        return min(HEARTBEAT_S, self.lease_s / 6)

    def close(self) -> None:
        self.engine.dispose()

    def transact(self, what: str, fn: Callable[[Session], T], retry: bool = True) -> T:
        """fn(session) in one transaction, committed when it returns, rolled back when it
        raises. A lost connection is retried with backoff for up to `retry_s` seconds (not
        at all with retry=False); any other database error, or the last one, is a StoreError
        naming `what`."""
        start = time.monotonic()
        deadline = start + (self.retry_s if retry else 0.0)
        delay, failed = RETRY_FIRST_S, False
        while True:
            try:
                with self.Session.begin() as s:
                    out = fn(s)
            except SQLAlchemyError as e:
                error = describe_error(e, self.url)
                left = deadline - time.monotonic()
                if not _transient(e, self.dialect) or left <= 0:
                    after = f" after retrying for {self.retry_s:g}s" if failed else ""
                    raise StoreError(
                        f"{what} in {self.display_url} failed{after}: {error}"
                    ) from None
                if self.on_retry is not None and not failed:
                    self.on_retry(f"{what}: {error}; retrying for up to {left:.0f}s")
                failed = True
                time.sleep(min(delay, left))
                delay = min(2 * delay, RETRY_MAX_S)
                continue
            if failed and self.on_retry is not None:
                self.on_retry(f"{what}: database back after {time.monotonic() - start:.0f}s")
            return out

    def clock(self) -> float:
        """The database's time (unix seconds): what leases and heartbeats are measured in."""
        return self.transact("reading the database clock", lambda s: s.scalar(select(now(s))))

    # ------------------------------------------------------------------ sweeps

    def submit(
        self,
        name: str,
        spec: dict[str, Any],
        trials: list[TrialConfig],
        code_version: str,
        replace: bool = False,
        rerun: bool = False,
    ) -> SubmitInfo:
        return self.transact(
            f"submitting sweep {name!r}",
            lambda s: store_sweeps.submit(s, name, spec, trials, code_version, replace, rerun),
        )

    def cancel(self, name: str) -> CancelInfo:
        return self.transact(
            f"cancelling sweep {name!r}", lambda s: store_sweeps.cancel(s, name, self.display_url)
        )

    def tag(self, name: str, add: Sequence[str] = (), remove: Sequence[str] = ()) -> list[str]:
        return self.transact(
            f"tagging sweep {name!r}",
            lambda s: store_labels.tag(s, name, self.display_url, add, remove),
        )

    def note(self, name: str, text: str | None) -> None:
        self.transact(
            f"writing the note of sweep {name!r}",
            lambda s: store_labels.note(s, name, self.display_url, text),
        )

    def shared_trials(self, name: str, trial_ids: list[int]) -> int:
        return self.transact(
            "counting shared trials", lambda s: store_sweeps.shared_trials(s, name, trial_ids)
        )

    def delete_results(self, trial_ids: list[int]) -> int:
        return self.transact(
            "deleting results", lambda s: store_sweeps.delete_results(s, trial_ids)
        )

    def upsert_dataset(self, info: dict[str, Any]) -> None:
        self.transact(
            f"recording dataset {info['name']!r}",
            lambda s: store_sweeps.upsert_dataset(s, info),
        )

    # ------------------------------------------------------------------ a driver's run

    def begin_run(self, sweep_id: int, only: Sequence[Only] = ()) -> None:
        self.transact(
            "starting the sweep",
            lambda s: store_trials.begin_run(s, sweep_id, self.owner, only),
        )

    def heartbeat(self, sweep_id: int) -> None:
        self.transact(
            "renewing leases",
            lambda s: store_trials.heartbeat(s, sweep_id, self.owner, self.lease_s),
            retry=False,
        )

    def finish_run(self, sweep_id: int, retry: bool = True) -> SweepStatus:
        return self.transact(
            "finishing the sweep",
            lambda s: store_trials.finish_run(s, sweep_id, self.owner, self.lease_s),
            retry=retry,
        )

    def runnable(
        self, sweep_id: int, retry_failed: bool = False, reopen: bool = True
    ) -> list[tuple[int, TrialConfig, int]]:
        return self.transact(
            "finding runnable trials",
            lambda s: store_trials.runnable(s, sweep_id, self.owner, retry_failed, reopen),
        )

    def running_elsewhere(self, sweep_id: int) -> int:
        return self.transact(
            "counting trials other drivers run",
            lambda s: store_trials.running_elsewhere(s, sweep_id, self.owner),
        )

    def mark_running(self, trial_id: int, host: str | None, gpu_id: str | None) -> bool:
        return self.transact(
            f"claiming trial {trial_id}",
            lambda s: store_trials.mark_running(
                s, trial_id, self.owner, self.lease_s, host, gpu_id
            ),
        )

    def record_result(self, trial_id: int, r: TrialResult) -> None:
        self.transact(
            f"recording the result of trial {trial_id}",
            lambda s: store_trials.record_result(s, trial_id, r, self._models_seen),
        )
        self._models_seen.update(m["name"] for m in r.models)

    def record_failure(self, trial_id: int, f: TrialFailure) -> bool:
        return self.transact(
            f"recording the failure of trial {trial_id}",
            lambda s: store_trials.record_failure(s, trial_id, self.owner, f),
        )

    def requeue(self, trial_id: int, error: str) -> None:
        self.transact(
            f"requeueing trial {trial_id}",
            lambda s: store_trials.requeue(s, trial_id, self.owner, error),
        )

    def reset_running(self, trial_ids: Iterable[int], retry: bool = True) -> None:
        ids = sorted(trial_ids)
        self.transact(
            "putting trials in flight back to pending",
            lambda s: store_trials.reset_running(s, ids, self.owner),
            retry=retry,
        )

    # ------------------------------------------------------------------ reads

    def sweep(self, name: str | None = None, sweep_id: int | None = None) -> dict[str, Any]:
        return self.transact(
            "reading a sweep", lambda s: store_reads.sweep(s, self.display_url, name, sweep_id)
        )

    def sweep_status(self, sweep_id: int) -> SweepStatus:
        return self.transact(
            "reading a sweep's status", lambda s: store_reads.sweep_status(s, sweep_id)
        )

    def cut(self, sweep_id: int) -> tuple[tuple[Only, ...], int] | None:
        return self.transact("reading the sweep's cut", lambda s: store_reads.cut(s, sweep_id))

    def counts(self, name: str | None = None) -> list[dict[str, Any]]:
        return self.transact(
            "counting trials", lambda s: store_reads.counts(s, self.display_url, name)
        )

    def trials(self, sweep_id: int, statuses: tuple[TrialStatus, ...]) -> list[dict[str, Any]]:
        return self.transact("listing trials", lambda s: store_reads.trials(s, sweep_id, statuses))

    def configs(self, sweep_id: int) -> list[TrialConfig]:
        return self.transact(
            "reading the sweep's trials", lambda s: store_reads.configs(s, sweep_id)
        )

    def profile_trials(self, sweep_id: int) -> list[dict[str, Any]]:
        return self.transact(
            "listing profile trials", lambda s: store_reads.profile_trials(s, sweep_id)
        )

    def acceptance_profile(self, key: dict[str, Any]) -> tuple[float, ...] | None:
        """The stored acceptance profile of `key` (orchestrator.acceptance.key), or None."""
        return self.transact(
            "reading an acceptance profile", lambda s: store_trials.acceptance_profile(s, key)
        )

    def finish_times(self, name: str, last: int = 20) -> list[tuple[float, float]]:
        return self.transact(
            "reading trial times", lambda s: store_reads.finish_times(s, name, last)
        )


def _transient(e: SQLAlchemyError, dialect: str) -> bool:
    """A lost or busy connection, worth retrying (not a bad statement or a constraint)."""
    if isinstance(e, DBAPIError) and e.connection_invalidated:
        return True
    if isinstance(e, PoolTimeout):
        return True
    if not isinstance(e, (OperationalError, InterfaceError)):
        return False
    if dialect == "sqlite":  # SQLite reports bad statements as OperationalError too
        text = str(getattr(e, "orig", e)).lower()
        return any(w in text for w in ("locked", "busy", "unable to open", "disk i/o"))
    return True
