"""Driver-side database operations (only the driver writes; workers return results).

Every write is one short transaction. Trials are global rows keyed by `config_hash`, linked to
sweeps through `sweep_trials`; inserts use ON CONFLICT DO NOTHING so concurrent submitters
and a repeated submission never duplicate a trial or a result. A trial is claimed with a
compare-and-set (pending -> running), so two drivers never run the same trial and a trial
cancelled meanwhile is skipped.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import SQLAlchemyError

from db.migrate import ensure_schema
from db.models import (
    DatasetInfo,
    ModelInfo,
    Result,
    Sweep,
    SweepStatus,
    SweepTrial,
    Trial,
    TrialStatus,
)
from db.session import (
    DatabaseError,
    create_db_engine,
    describe_error,
    redact,
    resolve_url,
    session_factory,
)
from engine.config import ConfigError
from orchestrator.records import METRICS, TrialConfig, TrialFailure, TrialResult

OPEN = (TrialStatus.PENDING, TrialStatus.RUNNING)  # trials a sweep still has to run
STALE_DRIVER_S = 60.0  # a driver on another host without a heartbeat for this long is dead
_CHUNK = 400


class StoreError(ConfigError):
    """A database problem or a request the database cannot satisfy, as one line."""


@dataclass(frozen=True)
class SubmitInfo:
    sweep_id: int
    total: int  # trials in the sweep
    new: int  # trials inserted by this submission
    done: int  # trials of the sweep that already have a result


class Store:
    def __init__(self, url: str | None = None, mode: str = "create") -> None:
        """`mode`: "create" (submit: a new SQLite file and the schema are created), "write"
        (resume, cancel: the database must exist and be writable) or "read" (status, query,
        ...: the database must exist; nothing is created)."""
        if mode not in ("create", "write", "read"):
            raise ValueError(f"unknown store mode {mode!r}")
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
        self._models_seen: set[str] = set()

    @property
    def display_url(self) -> str:
        return redact(self.url)

    def close(self) -> None:
        self.engine.dispose()

    def _insert(self, model):
        if self.dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        elif self.dialect == "sqlite":
            from sqlalchemy.dialects.sqlite import insert
        else:
            raise StoreError(f"unsupported database dialect {self.dialect!r}")
        return insert(model)

    # ------------------------------------------------------------------ sweeps

    def submit(
        self, name: str, spec: dict[str, Any], trials: list[TrialConfig], code_version: str
    ) -> SubmitInfo:
        """Create or update sweep `name` and make its trial set exactly `trials`."""
        hashes = [t.config_hash for t in trials]
        with self.Session.begin() as s:
            stmt = self._insert(Sweep).values(
                name=name,
                description=spec.get("description", ""),
                spec=spec,
                status=SweepStatus.SUBMITTED,
                code_version=code_version,
            )
            s.execute(
                stmt.on_conflict_do_update(
                    index_elements=["name"],
                    set_={
                        "spec": spec,
                        "code_version": code_version,
                        "description": spec.get("description", ""),
                        "updated_at": func.now(),
                    },
                )
            )
            sweep_id = s.scalar(select(Sweep.id).where(Sweep.name == name))
            new = 0
            for chunk in _chunks(trials):
                res = s.execute(
                    self._insert(Trial)
                    .on_conflict_do_nothing(index_elements=["config_hash"])
                    .returning(Trial.id),
                    [_trial_row(t) for t in chunk],
                )
                new += len(res.all())
            ids = {}
            for chunk in _chunks(hashes):
                ids.update(
                    s.execute(
                        select(Trial.config_hash, Trial.id).where(Trial.config_hash.in_(chunk))
                    ).all()
                )
            wanted = {ids[h] for h in hashes}
            linked = set(
                s.scalars(select(SweepTrial.trial_id).where(SweepTrial.sweep_id == sweep_id))
            )
            for chunk in _chunks(sorted(linked - wanted)):
                s.execute(
                    delete(SweepTrial).where(
                        SweepTrial.sweep_id == sweep_id, SweepTrial.trial_id.in_(chunk)
                    )
                )
            missing = sorted(wanted - linked)
            for chunk in _chunks(missing):
                s.execute(
                    self._insert(SweepTrial).on_conflict_do_nothing(),
                    [{"sweep_id": sweep_id, "trial_id": i} for i in chunk],
                )
            done = s.scalar(
                select(func.count())
                .select_from(SweepTrial)
                .join(Trial)
                .where(SweepTrial.sweep_id == sweep_id, Trial.status == TrialStatus.DONE)
            )
        return SubmitInfo(sweep_id=sweep_id, total=len(wanted), new=new, done=done or 0)

    def sweep(self, name: str | None = None, sweep_id: int | None = None) -> dict[str, Any]:
        """Sweep `name` (or `sweep_id`; else the most recently updated) as a dict."""
        with self.Session() as s:
            q = select(Sweep)
            if sweep_id is not None:
                q = q.where(Sweep.id == sweep_id)
            elif name:
                q = q.where(Sweep.name == name)
            else:
                q = q.order_by(Sweep.updated_at.desc(), Sweep.id.desc())
            row = s.scalars(q.limit(1)).first()
            if row is None:
                raise StoreError(
                    f"no sweep named {name!r} in {self.display_url}"
                    if name
                    else f"no sweeps in {self.display_url}"
                )
            return {c.name: getattr(row, c.name) for c in Sweep.__table__.columns}

    def sweep_status(self, sweep_id: int) -> SweepStatus:
        with self.Session() as s:
            return s.scalar(select(Sweep.status).where(Sweep.id == sweep_id))

    def check_driver(self, name: str, force: bool = False) -> None:
        """StoreError when sweep `name` exists and a live driver other than us runs it."""
        with self.Session() as s:
            row = s.scalars(select(Sweep).where(Sweep.name == name)).first()
            if row is not None and not force:
                _refuse_live_driver(row)

    def claim_driver(self, sweep_id: int, force: bool = False) -> None:
        """Register this process as the sweep's driver unless a live driver holds it."""
        with self.Session.begin() as s:
            row = s.get(Sweep, sweep_id, with_for_update=self.dialect == "postgresql")
            if not force:
                _refuse_live_driver(row)
            row.driver, row.heartbeat_at, row.status = _me(), time.time(), SweepStatus.RUNNING

    def heartbeat(self, sweep_id: int) -> None:
        with self.Session.begin() as s:
            s.execute(update(Sweep).where(Sweep.id == sweep_id).values(heartbeat_at=time.time()))

    def release_driver(self, sweep_id: int) -> SweepStatus:
        """Drop the driver claim; the sweep becomes finished, interrupted or stays cancelled."""
        with self.Session.begin() as s:
            row = s.get(Sweep, sweep_id)
            open_ = s.scalar(
                select(func.count())
                .select_from(SweepTrial)
                .join(Trial)
                .where(SweepTrial.sweep_id == sweep_id, Trial.status.in_(OPEN))
            )
            if row.status != SweepStatus.CANCELLED:
                row.status = SweepStatus.INTERRUPTED if open_ else SweepStatus.FINISHED
            row.driver, row.heartbeat_at = None, None
            return row.status

    def cancel(self, name: str) -> int:
        """Mark the sweep cancelled and its pending trials cancelled; returns how many."""
        sweep_id = self.sweep(name)["id"]
        with self.Session.begin() as s:
            s.execute(
                update(Sweep).where(Sweep.id == sweep_id).values(status=SweepStatus.CANCELLED)
            )
            res = s.execute(
                update(Trial)
                .where(Trial.id.in_(_members(sweep_id)), Trial.status == TrialStatus.PENDING)
                .values(status=TrialStatus.CANCELLED),
                execution_options={"synchronize_session": False},
            )
            return res.rowcount

    # ------------------------------------------------------------------ trials

    def runnable(
        self, sweep_id: int, retry_failed: bool = False
    ) -> list[tuple[int, TrialConfig, int]]:
        """Make the sweep's unfinished trials pending again and return them as
        (trial id, config, attempts). Call after `claim_driver` (running ones are orphans)."""
        reset = [TrialStatus.RUNNING, TrialStatus.CANCELLED]
        if retry_failed:
            reset.append(TrialStatus.FAILED)
        with self.Session.begin() as s:
            s.execute(
                update(Trial)
                .where(Trial.id.in_(_members(sweep_id)), Trial.status.in_(reset))
                .values(status=TrialStatus.PENDING),
                execution_options={"synchronize_session": False},
            )
            rows = s.execute(
                select(Trial.id, Trial.config, Trial.attempts)
                .where(Trial.id.in_(_members(sweep_id)), Trial.status == TrialStatus.PENDING)
                .order_by(Trial.id)
            ).all()
        return [(i, TrialConfig.from_dict(c), a) for i, c, a in rows]

    def mark_running(self, trial_id: int, host: str | None, gpu_id: str | None) -> bool:
        """pending -> running, attempts + 1; False when the trial is no longer pending."""
        with self.Session.begin() as s:
            res = s.execute(
                update(Trial)
                .where(Trial.id == trial_id, Trial.status == TrialStatus.PENDING)
                .values(
                    status=TrialStatus.RUNNING,
                    attempts=Trial.attempts + 1,
                    worker_host=host,
                    gpu_id=gpu_id,
                    started_at=time.time(),
                    error=None,
                ),
                execution_options={"synchronize_session": False},
            )
            return res.rowcount == 1

    def record_result(self, trial_id: int, r: TrialResult) -> None:
        """Store the trial's result and mark it done; a second result for the same trial or
        config hash is ignored (the first one stands)."""
        with self.Session.begin() as s:
            stored_hash = s.scalar(select(Trial.config_hash).where(Trial.id == trial_id))
            inserted = s.scalar(
                self._insert(Result)
                .values(
                    trial_id=trial_id,
                    config_hash=stored_hash,
                    **{m: r.metrics[m] for m in METRICS},
                    per_prompt=r.per_prompt,
                    per_iteration=r.per_iteration,
                )
                .on_conflict_do_nothing()
                .returning(Result.id)
            )
            if inserted is None:  # a duplicate: the first result and its worker/timing stand
                s.execute(
                    update(Trial)
                    .where(Trial.id == trial_id)
                    .values(status=TrialStatus.DONE, error=None)
                )
                return
            s.execute(
                update(Trial)
                .where(Trial.id == trial_id)
                .values(
                    status=TrialStatus.DONE,
                    error=None,
                    worker_host=r.host,
                    gpu_id=r.gpu_id,
                    started_at=r.started_at,
                    finished_at=r.finished_at,
                    wall_s=r.wall_s,
                    load_s=r.load_s,
                    code_version=r.code_version[:80],
                )
            )
            for m in r.models:
                if m["name"] not in self._models_seen:
                    s.execute(
                        self._insert(ModelInfo)
                        .values(**m)
                        .on_conflict_do_update(
                            index_elements=["name"], set_={**m, "updated_at": func.now()}
                        )
                    )
        self._models_seen.update(m["name"] for m in r.models)

    def record_failure(self, trial_id: int, f: TrialFailure) -> None:
        with self.Session.begin() as s:
            s.execute(
                update(Trial)
                .where(Trial.id == trial_id)
                .values(
                    status=TrialStatus.FAILED,
                    error=f.error,
                    worker_host=f.host,
                    gpu_id=f.gpu_id,
                    started_at=f.started_at,
                    finished_at=f.finished_at,
                    wall_s=f.finished_at - f.started_at,
                )
            )

    def requeue(self, trial_id: int, error: str) -> None:
        """The worker died while running it: back to pending (attempts stay counted)."""
        with self.Session.begin() as s:
            s.execute(
                update(Trial)
                .where(Trial.id == trial_id)
                .values(status=TrialStatus.PENDING, error=error)
            )

    def reset_running(self, trial_ids: Iterable[int]) -> None:
        """running -> pending for trials an interrupted driver had in flight."""
        with self.Session.begin() as s:
            for chunk in _chunks(sorted(trial_ids)):
                s.execute(
                    update(Trial)
                    .where(Trial.id.in_(chunk), Trial.status == TrialStatus.RUNNING)
                    .values(status=TrialStatus.PENDING),
                    execution_options={"synchronize_session": False},
                )

    def upsert_dataset(self, info: dict[str, Any]) -> None:
        with self.Session.begin() as s:
            s.execute(
                self._insert(DatasetInfo)
                .values(**info)
                .on_conflict_do_update(
                    index_elements=["name"], set_={**info, "updated_at": func.now()}
                )
            )

    # ------------------------------------------------------------------ reads

    def counts(self, name: str | None = None) -> list[dict[str, Any]]:
        """One row per sweep: status and trial counts by status."""
        with self.Session() as s:
            q = (
                select(
                    Sweep.name,
                    Sweep.status,
                    Sweep.driver,
                    Sweep.updated_at,
                    Trial.status,
                    func.count(),
                )
                .join(SweepTrial, SweepTrial.sweep_id == Sweep.id)
                .join(Trial, Trial.id == SweepTrial.trial_id)
                .group_by(Sweep.name, Sweep.status, Sweep.driver, Sweep.updated_at, Trial.status)
                .order_by(Sweep.updated_at, Sweep.name)
            )
            if name:
                q = q.where(Sweep.name == name)
            rows: dict[str, dict[str, Any]] = {}
            for sweep, status, driver, updated, tstatus, n in s.execute(q):
                r = rows.setdefault(
                    sweep,
                    {
                        "sweep": sweep,
                        "status": status,
                        "trials": 0,
                        **{t.value: 0 for t in TrialStatus},
                        "driver": driver,
                        "updated": str(updated)[:19],
                    },
                )
                r[tstatus.value] = n
                r["trials"] += n
        if name and not rows:
            self.sweep(name)  # raises when unknown
        return list(rows.values())

    def trials(self, sweep_id: int, statuses: tuple[TrialStatus, ...]) -> list[dict[str, Any]]:
        with self.Session() as s:
            rows = s.scalars(
                select(Trial)
                .where(Trial.id.in_(_members(sweep_id)), Trial.status.in_(statuses))
                .order_by(Trial.id)
            ).all()
            return [
                {
                    "trial": t.id,
                    "status": t.status,
                    "config": TrialConfig.from_dict(t.config).label(),
                    "attempts": t.attempts,
                    "worker": t.worker_host,
                    "gpu": t.gpu_id,
                    "error": _last_line(t.error),
                }
                for t in rows
            ]


def _me() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _refuse_live_driver(row: Sweep) -> None:
    if (
        row.driver
        and row.driver != _me()
        and row.status == SweepStatus.RUNNING
        and _driver_alive(row.driver, row.heartbeat_at)
    ):
        age = time.time() - (row.heartbeat_at or 0)
        raise StoreError(
            f"sweep {row.name!r} is being run by driver {row.driver} (heartbeat "
            f"{age:.0f}s ago); wait, `orch cancel {row.name}`, or pass --force"
        )


def _last_line(text: str | None) -> str:
    lines = (text or "").strip().splitlines()
    return lines[-1] if lines else ""


def _members(sweep_id: int):
    return select(SweepTrial.trial_id).where(SweepTrial.sweep_id == sweep_id)


def _trial_row(t: TrialConfig) -> dict[str, Any]:
    return {
        "config_hash": t.config_hash,
        "config": t.to_dict(),
        "method": t.method,
        "target": t.target,
        "draft": t.draft,
        "dataset": t.dataset,
        "temperature": t.temperature,
        "max_new_tokens": t.max_new_tokens,
        "repeat": t.repeat,
        "status": TrialStatus.PENDING,
        "attempts": 0,
    }


def _chunks(items: list, n: int = _CHUNK):
    for i in range(0, len(items), n):
        yield items[i : i + n]


def _driver_alive(driver: str, heartbeat_at: float | None) -> bool:
    host, _, pid = driver.rpartition(":")
    if host == socket.gethostname() and pid.isdigit():
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead
        except OSError:
            try:
                os.kill(int(pid), 0)
                return True
            except (ProcessLookupError, ValueError):
                return False
            except PermissionError:
                return True
    return heartbeat_at is not None and time.time() - heartbeat_at < STALE_DRIVER_S
