"""Driver-side database operations (only drivers write; workers return results).

Every database access goes through `Store.transact`: one short transaction, rolled back on
any error, a database error turned into one line naming the operation (StoreError). A lost
connection (server restarted, network) is retried with backoff for up to `retry_s` seconds
first, so a driver rides out a short outage; every write is therefore safe to repeat (a commit
whose acknowledgement was lost is retried too). Postgres resolving a deadlock (possible when
overlapping sweeps are submitted at once with their shared configs in different orders) counts
as such an error: the aborted transaction is retried.

Trials are global rows keyed by `config_hash`, linked to sweeps through `sweep_trials`;
inserts use ON CONFLICT DO NOTHING so concurrent submitters and a repeated submission never
duplicate a trial or a result.

Leases: each Store is one driver with an id from orchestrator.leases. It claims a trial
with a compare-and-set, pending -> running, that writes its id as the trial's `owner` and a
lease of `lease_s` seconds on the database's clock; `heartbeat` renews the leases of all its
running trials. `runnable` hands out pending trials and running ones whose lease ran out or
whose owner is a dead process on this host, never a trial a live driver holds, whatever sweep
it runs. So any number of drivers can run one sweep, or sweeps sharing configs, and split the
trials; a driver that stops heartbeating loses its trials once their lease runs out.

A profile trial (records.PROFILE) leaves no `results` row: its curves go to `profiles`
(`put_profiles`, replacing each key's earlier row) in the transaction that marks it done.

A sweep is finished once every trial of it is done or failed, whoever ran them: recording an
outcome settles every sweep that contains the trial.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from sqlalchemy import Float, and_, cast, delete, extract, func, or_, select, update
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import Session

from db.migrate import ensure_schema
from db.models import (
    DatasetInfo,
    ModelInfo,
    Profile,
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
from engine.profile import ForwardCurve
from orchestrator.leases import HEARTBEAT_S, HOST, LEASE_S, new_driver_id, owner_alive
from orchestrator.only import Only, matches
from orchestrator.records import METRICS, PROFILE, TrialConfig, TrialFailure, TrialResult

OPEN = (TrialStatus.PENDING, TrialStatus.RUNNING)  # trials a sweep still has to run
# A sweep holding any of these is not finished (cancelled trials wait for a resume).
UNSETTLED = (TrialStatus.PENDING, TrialStatus.RUNNING, TrialStatus.CANCELLED)
ENDED = (SweepStatus.FINISHED, SweepStatus.FAILED)  # every trial of the sweep done or failed
DB_RETRY_S = 300.0  # how long a driver retries a lost database before it stops
RETRY_FIRST_S, RETRY_MAX_S = 0.1, 5.0  # backoff between retries: doubling, capped
_CHUNK = 400

T = TypeVar("T")


class StoreError(ConfigError):
    """A database problem or a request the database cannot satisfy, as one line."""


class SweepChanged(StoreError):
    """A sweep resubmitted under its name with another trial set, without `replace`."""


@dataclass(frozen=True)
class SubmitInfo:
    sweep_id: int
    total: int  # trials in the sweep
    new: int  # trials inserted by this submission
    done: int  # trials of the sweep that already have a result
    added: int = 0  # trials the sweep did not have before (replace)
    removed: int = 0  # trials no longer in the sweep (replace)
    deleted: int = 0  # of those, trials in no other sweep: deleted with their results
    rerun: int = 0  # done trials put back to pending to be measured again (rerun)


@dataclass(frozen=True)
class CancelInfo:
    finished: bool  # the sweep was finished already: nothing changed
    cancelled: int  # pending trials cancelled
    shared: int  # pending trials left pending: another sweep that is not cancelled has them


class Store:
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
        return self.transact("reading the database clock", lambda s: s.scalar(select(self._now)))

    @property
    def _now(self):
        if self.dialect == "postgresql":
            return cast(extract("epoch", func.clock_timestamp()), Float)
        return (func.julianday("now") - 2440587.5) * 86400.0

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
        self,
        name: str,
        spec: dict[str, Any],
        trials: list[TrialConfig],
        code_version: str,
        replace: bool = False,
        rerun: bool = False,
    ) -> SubmitInfo:
        """Create or update sweep `name` with the trial set `trials` (new trials get ids in
        their order: the order drivers run them). Trials are written before the sweep row,
        the order every transaction here locks rows in (trials, then sweeps).

        A sweep's trial set is its identity: when `name` exists with other trials,
        SweepChanged says what differs, unless `replace`: then the sweep's set becomes
        `trials` (unchanged trials keep their results) and the trials it dropped that no
        other sweep holds are deleted with their results (running ones are left alone), so
        that reports over all sweeps do not show them either. `rerun`: the sweep's done trials
        go back to pending, to be measured again; each old result stays until its new one
        replaces it (record_result). All of it is one transaction."""
        hashes = [t.config_hash for t in trials]

        def tx(s: Session) -> SubmitInfo:
            before = dict(
                s.execute(
                    select(Trial.config_hash, Trial.config)
                    .join(SweepTrial, SweepTrial.trial_id == Trial.id)
                    .join(Sweep, Sweep.id == SweepTrial.sweep_id)
                    .where(Sweep.name == name)
                ).all()
            )
            added = [t for t in trials if t.config_hash not in before]
            removed = sorted(set(before) - set(hashes))
            if before and (added or removed) and not replace:
                raise SweepChanged(_changed(name, len(before), trials, added, removed, before))
            new = 0
            for chunk in _chunks(trials):
                res = s.execute(
                    self._insert(Trial)
                    .on_conflict_do_nothing(index_elements=["config_hash"])
                    .returning(Trial.id),
                    [_trial_row(t) for t in chunk],
                )
                new += len(res.all())
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
            dropped = sorted(linked - wanted)
            for chunk in _chunks(dropped):
                s.execute(
                    delete(SweepTrial).where(
                        SweepTrial.sweep_id == sweep_id, SweepTrial.trial_id.in_(chunk)
                    )
                )
            deleted = _delete_orphans(s, dropped)
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
            again = _reopen_done(s, s.scalars(_members(sweep_id)).all()) if rerun else 0
            status = s.scalar(select(Sweep.status).where(Sweep.id == sweep_id))
            if _settled(s, sweep_id):  # every config ran before, here or in another sweep
                status = _end_status(s, sweep_id)
            elif status in ENDED:  # the spec grew
                status = SweepStatus.SUBMITTED
            s.execute(update(Sweep).where(Sweep.id == sweep_id).values(status=status))
            return SubmitInfo(
                sweep_id=sweep_id,
                total=len(wanted),
                new=new,
                done=done or 0,
                added=len(added) if before else 0,
                removed=len(removed),
                deleted=deleted,
                rerun=again,
            )

        return self.transact(f"submitting sweep {name!r}", tx)

    def sweep(self, name: str | None = None, sweep_id: int | None = None) -> dict[str, Any]:
        """Sweep `name` (or `sweep_id`; else the most recently updated) as a dict."""

        def tx(s: Session) -> dict[str, Any]:
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

        return self.transact("reading a sweep", tx)

    def sweep_status(self, sweep_id: int) -> SweepStatus:
        return self.transact(
            "reading a sweep's status",
            lambda s: s.scalar(select(Sweep.status).where(Sweep.id == sweep_id)),
        )

    def begin_run(self, sweep_id: int, only: Sequence[Only] = ()) -> None:
        """This driver starts on the sweep: running (also when it was cancelled: a resume),
        taking the trials that match `only` (stored as the sweep's cut; empty: all)."""
        cut = [[o.key, list(o.values)] for o in only] or None
        self.transact(
            "starting the sweep",
            lambda s: s.execute(
                update(Sweep)
                .where(Sweep.id == sweep_id)
                .values(
                    status=SweepStatus.RUNNING,
                    driver=self.owner,
                    heartbeat_at=self._now,
                    only=cut,
                )
            ),
        )

    def cut(self, sweep_id: int) -> tuple[tuple[Only, ...], int] | None:
        """The --only cut of the sweep's latest run and how many of its trials are still
        pending or running; None when that run took the whole grid."""

        def tx(s: Session):
            only = s.scalar(select(Sweep.only).where(Sweep.id == sweep_id))
            if not only:
                return None
            rows = s.execute(
                select(Trial.status, Trial.config).where(
                    Trial.id.in_(_members(sweep_id)),
                    Trial.status.in_((TrialStatus.PENDING, TrialStatus.RUNNING)),
                )
            ).all()
            return only, rows

        found = self.transact("reading the sweep's cut", tx)
        if found is None:
            return None
        filters = tuple(Only(key, tuple(values)) for key, values in found[0])
        left = sum(
            status == TrialStatus.RUNNING or matches(TrialConfig.from_dict(config), filters)
            for status, config in found[1]
        )
        return filters, left

    def heartbeat(self, sweep_id: int) -> None:
        """Renew the leases of this driver's running trials and mark the sweep as run by it
        (running again if another driver had left it interrupted). One try: the next
        heartbeat comes well before the lease runs out."""

        def tx(s: Session) -> None:
            s.execute(
                update(Trial)
                .where(Trial.owner == self.owner, Trial.status == TrialStatus.RUNNING)
                .values(lease_until=self._now + self.lease_s),
                execution_options={"synchronize_session": False},
            )
            s.execute(
                update(Sweep)
                .where(
                    Sweep.id == sweep_id,
                    Sweep.status.not_in((SweepStatus.CANCELLED, *ENDED)),
                )
                .values(status=SweepStatus.RUNNING, driver=self.owner, heartbeat_at=self._now)
            )

        self.transact("renewing leases", tx, retry=False)

    def finish_run(self, sweep_id: int, retry: bool = True) -> SweepStatus:
        """This driver leaves the sweep. Its status becomes finished when every trial is done
        or failed (failed when every one failed); else it stays cancelled, or running while
        another driver heartbeats it, or becomes interrupted."""

        def tx(s: Session) -> SweepStatus:
            row = s.get(Sweep, sweep_id)
            now = s.scalar(select(self._now))
            other = (
                row.driver not in (None, self.owner)
                and row.heartbeat_at is not None
                and row.heartbeat_at > now - self.lease_s
            )
            if _settled(s, sweep_id):
                row.status = _end_status(s, sweep_id)
            elif row.status != SweepStatus.CANCELLED:
                row.status = SweepStatus.RUNNING if other else SweepStatus.INTERRUPTED
            if not other:
                row.driver, row.heartbeat_at = None, None
            return row.status

        return self.transact("finishing the sweep", tx, retry=retry)

    def cancel(self, name: str) -> CancelInfo:
        """Cancel the sweep and its pending trials, but not those another sweep that is not
        cancelled contains too; a finished sweep stays as it is."""

        def tx(s: Session) -> CancelInfo:
            row = s.scalars(select(Sweep).where(Sweep.name == name)).first()
            if row is None:
                raise StoreError(f"no sweep named {name!r} in {self.display_url}")
            if _settled(s, row.id):
                return CancelInfo(finished=True, cancelled=0, shared=0)
            kept = (
                select(SweepTrial.trial_id)
                .join(Sweep)
                .where(Sweep.id != row.id, Sweep.status != SweepStatus.CANCELLED)
            )
            pending = (Trial.id.in_(_members(row.id)), Trial.status == TrialStatus.PENDING)
            n = s.execute(
                update(Trial)
                .where(*pending, Trial.id.not_in(kept))
                .values(status=TrialStatus.CANCELLED),
                execution_options={"synchronize_session": False},
            ).rowcount
            shared = s.scalar(select(func.count()).select_from(Trial).where(*pending))
            row.status = SweepStatus.CANCELLED
            return CancelInfo(finished=False, cancelled=n, shared=shared or 0)

        return self.transact(f"cancelling sweep {name!r}", tx)

    def shared_trials(self, name: str, trial_ids: list[int]) -> int:
        """How many of `trial_ids` another sweep than `name` holds too."""

        def tx(s: Session) -> int:
            n = 0
            for chunk in _chunks(sorted(trial_ids)):
                n += s.scalar(
                    select(func.count(func.distinct(SweepTrial.trial_id)))
                    .join(Sweep)
                    .where(SweepTrial.trial_id.in_(chunk), Sweep.name != name)
                )
            return n

        return self.transact("counting shared trials", tx)

    def delete_results(self, trial_ids: list[int]) -> int:
        """Delete the results of the done trials among `trial_ids`, which go back to pending
        (a resume measures them again), in one transaction; returns how many."""

        def tx(s: Session) -> int:
            done = []
            for chunk in _chunks(sorted(trial_ids)):
                done += s.scalars(
                    select(Trial.id).where(Trial.id.in_(chunk), Trial.status == TrialStatus.DONE)
                ).all()
            for chunk in _chunks(done):
                s.execute(delete(Result).where(Result.trial_id.in_(chunk)))
            return _reopen_done(s, done)

        return self.transact("deleting results", tx)

    # ------------------------------------------------------------------ trials

    def runnable(
        self, sweep_id: int, retry_failed: bool = False, reopen: bool = True
    ) -> list[tuple[int, TrialConfig, int]]:
        """The sweep's trials this driver may claim now, as (trial id, config, attempts):
        pending ones and running ones whose lease ran out or whose owner is a dead process on
        this host (both go back to pending here). With `reopen`, cancelled trials (and failed
        ones with `retry_failed`) become pending first: what a resume does once."""

        def tx(s: Session) -> list[tuple[int, TrialConfig, int]]:
            members = Trial.id.in_(_members(sweep_id))
            if reopen:
                again = [TrialStatus.CANCELLED] + ([TrialStatus.FAILED] if retry_failed else [])
                s.execute(
                    update(Trial)
                    .where(members, Trial.status.in_(again))
                    .values(status=TrialStatus.PENDING),
                    execution_options={"synchronize_session": False},
                )
            running = (members, Trial.status == TrialStatus.RUNNING)
            owners = s.scalars(
                select(Trial.owner).distinct().where(*running, Trial.owner.like(f"{HOST}:%"))
            ).all()
            dead = [o for o in owners if o != self.owner and not owner_alive(o)]
            s.execute(
                update(Trial)
                .where(
                    *running,
                    or_(
                        Trial.lease_until.is_(None),
                        Trial.lease_until < self._now,
                        Trial.owner.in_(dead),
                    ),
                )
                .values(status=TrialStatus.PENDING, owner=None, lease_until=None),
                execution_options={"synchronize_session": False},
            )
            rows = s.execute(
                select(Trial.id, Trial.config, Trial.attempts)
                .where(members, Trial.status == TrialStatus.PENDING)
                .order_by(Trial.id)
            ).all()
            return [(i, TrialConfig.from_dict(c), a) for i, c, a in rows]

        return self.transact("finding runnable trials", tx)

    def running_elsewhere(self, sweep_id: int) -> int:
        """Trials of the sweep that other drivers hold under a live lease."""
        return self.transact(
            "counting trials other drivers run",
            lambda s: s.scalar(
                select(func.count())
                .select_from(Trial)
                .where(
                    Trial.id.in_(_members(sweep_id)),
                    Trial.status == TrialStatus.RUNNING,
                    Trial.owner != self.owner,
                    Trial.lease_until >= self._now,
                )
            ),
        )

    def mark_running(self, trial_id: int, host: str | None, gpu_id: str | None) -> bool:
        """Claim the trial for this driver: pending (or running under a lease that ran out)
        -> running with a fresh lease, attempts + 1. False when another driver holds it or it
        is finished or cancelled. Running under this driver already counts as claimed: the
        commit of a first try may have gone through before the connection was lost."""
        claimable = or_(
            Trial.status == TrialStatus.PENDING,
            and_(
                Trial.status == TrialStatus.RUNNING,
                or_(
                    Trial.owner == self.owner,
                    Trial.lease_until.is_(None),
                    Trial.lease_until < self._now,
                ),
            ),
        )
        return self.transact(
            f"claiming trial {trial_id}",
            lambda s: (
                s.execute(
                    update(Trial)
                    .where(Trial.id == trial_id, claimable)
                    .values(
                        status=TrialStatus.RUNNING,
                        owner=self.owner,
                        lease_until=self._now + self.lease_s,
                        attempts=Trial.attempts + 1,
                        worker_host=host,
                        gpu_id=gpu_id,
                        worker_node=None,
                        started_at=time.time(),
                        error=None,
                    ),
                    execution_options={"synchronize_session": False},
                ).rowcount
                == 1
            ),
        )

    def record_result(self, trial_id: int, r: TrialResult) -> None:
        """Store the trial's result and mark it done, whoever holds it now; a second result
        for the same trial or config hash is ignored (the first one stands). A trial put back
        to pending to be measured again (rerun, delete_results...) still holding its old
        result gets the new one in its place, in this one transaction. A profile trial's
        curves replace the stored profiles of their keys instead (no `results` row)."""

        def tx(s: Session) -> None:
            stored_hash, status, method = s.execute(
                select(Trial.config_hash, Trial.status, Trial.method).where(Trial.id == trial_id)
            ).one()
            if method == PROFILE:
                inserted = status != TrialStatus.DONE  # done: the first measurement stands
                if inserted:
                    put_profiles(
                        s, [(ForwardCurve.from_dict(p["curve"]), p["info"]) for p in r.profiles]
                    )
            else:
                inserted = self._insert_result(s, trial_id, stored_hash, status, r)
            values: dict[str, Any] = {
                "status": TrialStatus.DONE,
                "error": None,
                "owner": None,
                "lease_until": None,
            }
            if inserted:  # a duplicate: the first result and its worker stand
                values.update(
                    worker_host=r.host,
                    gpu_id=r.gpu_id,
                    worker_node=r.node,
                    started_at=r.started_at,
                    finished_at=r.finished_at,
                    wall_s=r.wall_s,
                    load_s=r.load_s,
                    code_version=r.code_version[:80],
                    device_name=r.device_name[:200] or None,
                    checkpoints=r.checkpoints or None,
                )
            s.execute(update(Trial).where(Trial.id == trial_id).values(**values))
            if inserted:
                for m in r.models:
                    if m["name"] not in self._models_seen:
                        s.execute(
                            self._insert(ModelInfo)
                            .values(**m)
                            .on_conflict_do_update(
                                index_elements=["name"], set_={**m, "updated_at": func.now()}
                            )
                        )
            _settle(s, trial_id)

        self.transact(f"recording the result of trial {trial_id}", tx)
        self._models_seen.update(m["name"] for m in r.models)

    def _insert_result(
        self, s: Session, trial_id: int, stored_hash: str, status: TrialStatus, r: TrialResult
    ) -> bool:
        """Insert the trial's `results` row; False when it has one already (a duplicate)."""
        if status != TrialStatus.DONE:  # measured again (rerun): the new result replaces
            s.execute(delete(Result).where(Result.trial_id == trial_id))  # the old one
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
        return inserted is not None

    def record_failure(self, trial_id: int, f: TrialFailure) -> bool:
        """running -> failed with the error, if this driver still holds the trial (else
        another driver took it over after the lease ran out: False, nothing written)."""

        def tx(s: Session) -> bool:
            n = s.execute(
                update(Trial)
                .where(
                    Trial.id == trial_id,
                    Trial.owner == self.owner,
                    Trial.status == TrialStatus.RUNNING,
                )
                .values(
                    status=TrialStatus.FAILED,
                    owner=None,
                    lease_until=None,
                    error=f.error,
                    worker_host=f.host,
                    gpu_id=f.gpu_id,
                    worker_node=f.node,
                    started_at=f.started_at,
                    finished_at=f.finished_at,
                    wall_s=f.finished_at - f.started_at,
                ),
                execution_options={"synchronize_session": False},
            ).rowcount
            _settle(s, trial_id)
            return n == 1

        return self.transact(f"recording the failure of trial {trial_id}", tx)

    def requeue(self, trial_id: int, error: str) -> None:
        """The worker died while running it: back to pending (attempts stay counted)."""
        self.transact(
            f"requeueing trial {trial_id}",
            lambda s: s.execute(
                update(Trial)
                .where(
                    Trial.id == trial_id,
                    Trial.owner == self.owner,
                    Trial.status == TrialStatus.RUNNING,
                )
                .values(status=TrialStatus.PENDING, owner=None, lease_until=None, error=error),
                execution_options={"synchronize_session": False},
            ),
        )

    def reset_running(self, trial_ids: Iterable[int], retry: bool = True) -> None:
        """running -> pending for trials this driver holds (it is stopping)."""
        ids = sorted(trial_ids)

        def tx(s: Session) -> None:
            for chunk in _chunks(ids):
                s.execute(
                    update(Trial)
                    .where(
                        Trial.id.in_(chunk),
                        Trial.owner == self.owner,
                        Trial.status == TrialStatus.RUNNING,
                    )
                    .values(status=TrialStatus.PENDING, owner=None, lease_until=None),
                    execution_options={"synchronize_session": False},
                )

        self.transact("putting trials in flight back to pending", tx, retry=retry)

    def upsert_dataset(self, info: dict[str, Any]) -> None:
        self.transact(
            f"recording dataset {info['name']!r}",
            lambda s: s.execute(
                self._insert(DatasetInfo)
                .values(**info)
                .on_conflict_do_update(
                    index_elements=["name"], set_={**info, "updated_at": func.now()}
                )
            ),
        )

    # ------------------------------------------------------------------ reads

    def counts(self, name: str | None = None) -> list[dict[str, Any]]:
        """One row per sweep: status and trial counts by status. A sweep stored as running
        whose drivers have all stopped heartbeating (killed) shows as interrupted."""

        def tx(s: Session) -> tuple[list, float]:
            q = (
                select(
                    Sweep.name,
                    Sweep.status,
                    Sweep.driver,
                    Sweep.heartbeat_at,
                    Sweep.updated_at,
                    Trial.status,
                    func.count(),
                )
                .join(SweepTrial, SweepTrial.sweep_id == Sweep.id)
                .join(Trial, Trial.id == SweepTrial.trial_id)
                .group_by(
                    Sweep.name,
                    Sweep.status,
                    Sweep.driver,
                    Sweep.heartbeat_at,
                    Sweep.updated_at,
                    Trial.status,
                )
                .order_by(Sweep.updated_at, Sweep.name)
            )
            if name:
                q = q.where(Sweep.name == name)
            return s.execute(q).all(), s.scalar(select(self._now))

        found, now = self.transact("counting trials", tx)
        rows: dict[str, dict[str, Any]] = {}
        for sweep, status, driver, beat, updated, tstatus, n in found:
            if status == SweepStatus.RUNNING and (beat is None or beat < now - LEASE_S):
                status, driver = SweepStatus.INTERRUPTED, None
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
        def tx(s: Session) -> list[dict[str, Any]]:
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
                    "driver": t.owner,
                    "error": _last_line(t.error),
                }
                for t in rows
            ]

        return self.transact("listing trials", tx)

    def configs(self, sweep_id: int) -> list[TrialConfig]:
        """Every trial config of the sweep (for `--only`, orchestrator/only.py)."""
        return self.transact(
            "reading the sweep's trials",
            lambda s: [
                TrialConfig.from_dict(c)
                for c in s.scalars(
                    select(Trial.config).where(Trial.id.in_(_members(sweep_id))).order_by(Trial.id)
                )
            ],
        )

    def profile_trials(self, sweep_id: int) -> list[dict[str, Any]]:
        """The sweep's profile trials (records.PROFILE), whatever their status, with the
        device that measured each one done."""

        def tx(s: Session) -> list[dict[str, Any]]:
            rows = s.scalars(
                select(Trial)
                .where(Trial.id.in_(_members(sweep_id)), Trial.method == PROFILE)
                .order_by(Trial.id)
            ).all()
            return [
                {
                    "trial": t.id,
                    "status": t.status,
                    "profile": TrialConfig.from_dict(t.config).label(),
                    "device": t.device_name or "",
                    "worker": t.worker_host or "",
                    "error": _last_line(t.error),
                }
                for t in rows
            ]

        return self.transact("listing profile trials", tx)

    def finish_times(self, name: str, last: int = 20) -> list[tuple[float, float]]:
        """(started_at, finished_at) of sweep `name`'s `last` most recently finished trials
        (done or failed), newest first: what `orch status` estimates the time left from."""

        def tx(s: Session) -> list[tuple[float, float]]:
            sweep_id = s.scalar(select(Sweep.id).where(Sweep.name == name))
            rows = s.execute(
                select(Trial.started_at, Trial.finished_at)
                .where(
                    Trial.id.in_(_members(sweep_id)),
                    Trial.status.in_((TrialStatus.DONE, TrialStatus.FAILED)),
                    Trial.started_at.is_not(None),
                    Trial.finished_at.is_not(None),
                )
                .order_by(Trial.finished_at.desc())
                .limit(last)
            ).all()
            return [(float(a), float(b)) for a, b in rows]

        return self.transact("reading trial times", tx)


def put_profiles(s: Session, measured: Sequence[tuple[ForwardCurve, dict[str, Any]]]) -> None:
    """Store (or replace) each curve's profile row inside transaction `s`; the dict beside
    each curve is engine.profile.device_info of the device that measured it. A key (device,
    model, dtype, engine) holds its latest measurement."""
    for curve, info in measured:
        key = dict(
            device_name=curve.device_name,
            model=curve.model,
            dtype=curve.dtype,
            engine=curve.engine,
        )
        s.execute(delete(Profile).filter_by(**key))
        s.add(
            Profile(
                **key,
                points=curve.to_dict()["points"],
                driver=str(info.get("driver", "")),
                versions={k: str(info.get(k, "")) for k in ("torch", "transformers", "triton")},
                cores=int(info.get("cores", 0)),
                host=str(info.get("host", "")),
            )
        )
        s.flush()  # the delete and the insert of one key in order


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


def _settled(s: Session, sweep_id: int) -> bool:
    """Every trial of the sweep is done or failed."""
    return (
        s.scalar(
            select(func.count())
            .select_from(Trial)
            .where(Trial.id.in_(_members(sweep_id)), Trial.status.in_(UNSETTLED))
        )
        == 0
    )


def _end_status(s: Session, sweep_id: int) -> SweepStatus:
    """The status of a settled sweep: failed when its trials all failed, else finished."""
    of = (Trial.id.in_(_members(sweep_id)),)
    failed = Trial.status == TrialStatus.FAILED
    done = s.scalar(select(func.count()).select_from(Trial).where(*of, ~failed))
    failed = s.scalar(select(func.count()).select_from(Trial).where(*of, failed))
    return SweepStatus.FAILED if failed and not done else SweepStatus.FINISHED


def _settle(s: Session, trial_id: int) -> None:
    """Mark finished every sweep containing the trial whose trials are all done or failed
    (failed when they all failed).
    The sweep rows are locked first (in id order, after the trial row: the order of every
    transaction here), so that of two drivers recording a sweep's last two trials at once,
    the second sees the first's commit (each statement reads afresh after the lock wait)."""
    containing = select(SweepTrial.sweep_id).where(SweepTrial.trial_id == trial_id)
    s.execute(
        select(Sweep.id)
        .where(Sweep.id.in_(containing))
        .order_by(Sweep.id)
        .with_for_update(key_share=True)
    ).all()
    unsettled = (
        select(SweepTrial.trial_id)
        .join(Trial, Trial.id == SweepTrial.trial_id)
        .where(SweepTrial.sweep_id == Sweep.id, Trial.status.in_(UNSETTLED))
        .exists()
    )
    succeeded = (
        select(SweepTrial.trial_id)
        .join(Trial, Trial.id == SweepTrial.trial_id)
        .where(SweepTrial.sweep_id == Sweep.id, Trial.status == TrialStatus.DONE)
        .exists()
    )
    for status, outcome in ((SweepStatus.FINISHED, succeeded), (SweepStatus.FAILED, ~succeeded)):
        s.execute(
            update(Sweep)
            .where(Sweep.id.in_(containing), Sweep.status.not_in(ENDED), ~unsettled, outcome)
            .values(status=status),
            execution_options={"synchronize_session": False},
        )


def _changed(
    name: str,
    had: int,
    trials: list[TrialConfig],
    added: list[TrialConfig],
    removed: list[str],
    before: dict[str, dict],
) -> str:
    """One line: how the trial set of sweep `name` would change, and what to do."""
    parts = []
    if added:
        parts.append(f"{len(added)} added (e.g. {added[0].label()})")
    if removed:
        example = TrialConfig.from_dict(before[removed[0]]).label()
        parts.append(f"{len(removed)} removed (e.g. {example})")
    auto = sum(1 for h in removed if "auto" in (before[h].get("device"), before[h].get("dtype")))
    why = (
        f"; {auto} of the removed were stored with device or dtype auto, which is now "
        "resolved to where trials run, so their identity changed"
        if auto
        else ""
    )
    return (
        f"sweep {name!r} has {had} trials and this file gives {len(trials)}: "
        f"{', '.join(parts)}{why}; resubmit with --replace to make these its trials "
        f"(results of unchanged trials are kept, removed ones no other sweep holds are "
        f"deleted), or give the sweep another name"
    )


def _delete_orphans(s: Session, trial_ids: list[int]) -> int:
    """Delete, with their results, the trials among `trial_ids` that no sweep holds any
    more (running ones stay: a driver is about to record them)."""
    held = select(SweepTrial.trial_id)
    orphans = []
    for chunk in _chunks(trial_ids):
        orphans += s.scalars(
            select(Trial.id).where(
                Trial.id.in_(chunk), Trial.id.not_in(held), Trial.status != TrialStatus.RUNNING
            )
        ).all()
    for chunk in _chunks(sorted(orphans)):
        s.execute(delete(Result).where(Result.trial_id.in_(chunk)))
        s.execute(delete(Trial).where(Trial.id.in_(chunk)))
    return len(orphans)


def _reopen_done(s: Session, trial_ids: list[int]) -> int:
    """done -> pending for the trials among `trial_ids`, to be measured again; their results
    stay until the new ones replace them. Every sweep holding one is no longer finished."""
    n = 0
    for chunk in _chunks(sorted(trial_ids)):
        n += s.execute(
            update(Trial)
            .where(Trial.id.in_(chunk), Trial.status == TrialStatus.DONE)
            .values(status=TrialStatus.PENDING, attempts=0, error=None),
            execution_options={"synchronize_session": False},
        ).rowcount
        s.execute(
            update(Sweep)
            .where(
                Sweep.id.in_(select(SweepTrial.sweep_id).where(SweepTrial.trial_id.in_(chunk))),
                Sweep.status == SweepStatus.FINISHED,
            )
            .values(status=SweepStatus.SUBMITTED),
            execution_options={"synchronize_session": False},
        )
    return n


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
