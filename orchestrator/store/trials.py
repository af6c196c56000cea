"""A driver's run of a sweep (handle.py): begin, claim trials under leases, renew
them, record each outcome, finish. Each function runs inside the one transaction of a
`Store.transact` call; `owner` is the driver's id and `lease_s` its lease.

Leases: each Store is one driver with an id from orchestrator.store.leases. It claims a trial
with a compare-and-set, pending -> running, that writes its id as the trial's `owner` and a
lease of `lease_s` seconds on the database's clock; `heartbeat` renews the leases of all its
running trials. `runnable` hands out pending trials and running ones whose lease ran out or
whose owner is a dead process on this host, never a trial a live driver holds, whatever sweep
it runs. So any number of drivers can run one sweep, or sweeps sharing configs, and split the
trials; a driver that stops heartbeating loses its trials once their lease runs out.

A profile trial (records.PROFILE) leaves no `results` row: its curves go to `profiles`
(`put_profiles`, replacing each key's earlier row) in the transaction that marks it done. An
acceptance trial (orchestrator/acceptance.py) leaves none either: its vector goes to
`acceptance_profiles` (`put_acceptance`; the first measurement of a key stands).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import and_, delete, func, or_, select, update
from sqlalchemy.orm import Session

from db.models import (
    AcceptanceProfile,
    ModelInfo,
    Profile,
    Result,
    Sweep,
    SweepStatus,
    Trial,
    TrialStatus,
)
from engine.cost_model import ForwardCurve
from orchestrator.acceptance import ACCEPTANCE
from orchestrator.only import Only
from orchestrator.records import METRICS, PROFILE, TrialConfig, TrialFailure, TrialResult
from orchestrator.store.leases import HOST, owner_alive
from orchestrator.store.settle import end_status, settle, settled
from orchestrator.store.sql import ENDED, chunks, insert, members, now


def begin_run(s: Session, sweep_id: int, owner: str, only: Sequence[Only] = ()) -> None:
    """This driver starts on the sweep: running (also when it was cancelled: a resume),
    taking the trials that match `only` (stored as the sweep's cut; empty: all)."""
    cut = [[o.key, list(o.values)] for o in only] or None
    s.execute(
        update(Sweep)
        .where(Sweep.id == sweep_id)
        .values(status=SweepStatus.RUNNING, driver=owner, heartbeat_at=now(s), only=cut)
    )


def heartbeat(s: Session, sweep_id: int, owner: str, lease_s: float) -> None:
    """Renew the leases of this driver's running trials and mark the sweep as run by it
    (running again if another driver had left it interrupted). One try: the next
    heartbeat comes well before the lease runs out."""
    s.execute(
        update(Trial)
        .where(Trial.owner == owner, Trial.status == TrialStatus.RUNNING)
        .values(lease_until=now(s) + lease_s),
        execution_options={"synchronize_session": False},
    )
    s.execute(
        update(Sweep)
        .where(
            Sweep.id == sweep_id,
            Sweep.status.not_in((SweepStatus.CANCELLED, *ENDED)),
        )
        .values(status=SweepStatus.RUNNING, driver=owner, heartbeat_at=now(s))
    )


def finish_run(s: Session, sweep_id: int, owner: str, lease_s: float) -> SweepStatus:
    """This driver leaves the sweep. Its status becomes finished when every trial is done
    or failed (failed when every one failed); else it stays cancelled, or running while
    another driver heartbeats it, or becomes interrupted."""
    row = s.get(Sweep, sweep_id)
    clock = s.scalar(select(now(s)))
    other = (
        row.driver not in (None, owner)
        and row.heartbeat_at is not None
        and row.heartbeat_at > clock - lease_s
    )
    if settled(s, sweep_id):
        row.status = end_status(s, sweep_id)
    elif row.status != SweepStatus.CANCELLED:
        row.status = SweepStatus.RUNNING if other else SweepStatus.INTERRUPTED
    if not other:
        row.driver, row.heartbeat_at = None, None
    return row.status


def runnable(
    s: Session, sweep_id: int, owner: str, retry_failed: bool = False, reopen: bool = True
) -> list[tuple[int, TrialConfig, int]]:
    """The sweep's trials this driver may claim now, as (trial id, config, attempts):
    pending ones and running ones whose lease ran out or whose owner is a dead process on
    this host (both go back to pending here). With `reopen`, cancelled trials (and failed
    ones with `retry_failed`) become pending first: what a resume does once."""
    in_sweep = Trial.id.in_(members(sweep_id))
    if reopen:
        again = [TrialStatus.CANCELLED] + ([TrialStatus.FAILED] if retry_failed else [])
        s.execute(
            update(Trial)
            .where(in_sweep, Trial.status.in_(again))
            .values(status=TrialStatus.PENDING),
            execution_options={"synchronize_session": False},
        )
    running = (in_sweep, Trial.status == TrialStatus.RUNNING)
    owners = s.scalars(
        select(Trial.owner).distinct().where(*running, Trial.owner.like(f"{HOST}:%"))
    ).all()
    dead = [o for o in owners if o != owner and not owner_alive(o)]
    s.execute(
        update(Trial)
        .where(
            *running,
            or_(
                Trial.lease_until.is_(None),
                Trial.lease_until < now(s),
                Trial.owner.in_(dead),
            ),
        )
        .values(status=TrialStatus.PENDING, owner=None, lease_until=None),
        execution_options={"synchronize_session": False},
    )
    rows = s.execute(
        select(Trial.id, Trial.config, Trial.attempts)
        .where(in_sweep, Trial.status == TrialStatus.PENDING)
        .order_by(Trial.id)
    ).all()
    return [(i, TrialConfig.from_dict(c), a) for i, c, a in rows]


def running_elsewhere(s: Session, sweep_id: int, owner: str) -> int:
    """Trials of the sweep that other drivers hold, whether or not their lease still runs:
    one that ran out since the last `runnable` is taken back by the next, so a driver that
    waits on this count never leaves such a trial unrun (a lease that ends between the two
    calls stopped a resume one trial short)."""
    return s.scalar(
        select(func.count())
        .select_from(Trial)
        .where(
            Trial.id.in_(members(sweep_id)),
            Trial.status == TrialStatus.RUNNING,
            Trial.owner != owner,
        )
    )


def mark_running(
    s: Session, trial_id: int, owner: str, lease_s: float, host: str | None, gpu_id: str | None
) -> bool:
    """Claim the trial for this driver: pending (or running under a lease that ran out)
    -> running with a fresh lease, attempts + 1. False when another driver holds it or it
    is finished or cancelled. Running under this driver already counts as claimed: the
    commit of a first try may have gone through before the connection was lost."""
    claimable = or_(
        Trial.status == TrialStatus.PENDING,
        and_(
            Trial.status == TrialStatus.RUNNING,
            or_(
                Trial.owner == owner,
                Trial.lease_until.is_(None),
                Trial.lease_until < now(s),
            ),
        ),
    )
    return (
        s.execute(
            update(Trial)
            .where(Trial.id == trial_id, claimable)
            .values(
                status=TrialStatus.RUNNING,
                owner=owner,
                lease_until=now(s) + lease_s,
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
    )


def record_result(s: Session, trial_id: int, r: TrialResult, models_seen: Collection[str]) -> None:
    """Store the trial's result and mark it done, whoever holds it now; a second result
    for the same trial or config hash is ignored (the first one stands). A trial put back
    to pending to be measured again (rerun, delete_results...) still holding its old
    result gets the new one in its place, in this one transaction. A profile trial's
    curves replace the stored profiles of their keys instead (no `results` row)."""
    stored_hash, status, method = s.execute(
        select(Trial.config_hash, Trial.status, Trial.method).where(Trial.id == trial_id)
    ).one()
    if method == PROFILE:
        inserted = status != TrialStatus.DONE  # done: the first measurement stands
        if inserted:
            put_profiles(s, [(ForwardCurve.from_dict(p["curve"]), p["info"]) for p in r.profiles])
    elif method == ACCEPTANCE:
        inserted = status != TrialStatus.DONE
        if inserted:
            put_acceptance(s, stored_hash, r)
    else:
        inserted = _insert_result(s, trial_id, stored_hash, status, r)
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
            versions=r.versions or None,
        )
    s.execute(update(Trial).where(Trial.id == trial_id).values(**values))
    if inserted:
        columns = set(ModelInfo.__table__.c.keys())
        for m in r.models:
            if m["name"] not in models_seen:
                # the model's own facts; a trial's revision, commit and placement are its config's
                m = {k: v for k, v in m.items() if k in columns}
                s.execute(
                    insert(s, ModelInfo)
                    .values(**m)
                    .on_conflict_do_update(
                        index_elements=["name"], set_={**m, "updated_at": func.now()}
                    )
                )
    settle(s, trial_id)


def record_failure(s: Session, trial_id: int, owner: str, f: TrialFailure) -> bool:
    """running -> failed with the error, if this driver still holds the trial (else
    another driver took it over after the lease ran out: False, nothing written)."""
    n = s.execute(
        update(Trial)
        .where(
            Trial.id == trial_id,
            Trial.owner == owner,
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
    settle(s, trial_id)
    return n == 1


def requeue(s: Session, trial_id: int, owner: str, error: str) -> None:
    """The worker died while running it: back to pending (attempts stay counted)."""
    s.execute(
        update(Trial)
        .where(
            Trial.id == trial_id,
            Trial.owner == owner,
            Trial.status == TrialStatus.RUNNING,
        )
        .values(status=TrialStatus.PENDING, owner=None, lease_until=None, error=error),
        execution_options={"synchronize_session": False},
    )


def reset_running(s: Session, ids: list[int], owner: str) -> None:
    """running -> pending for trials this driver holds (it is stopping)."""
    for chunk in chunks(ids):
        s.execute(
            update(Trial)
            .where(
                Trial.id.in_(chunk),
                Trial.owner == owner,
                Trial.status == TrialStatus.RUNNING,
            )
            .values(status=TrialStatus.PENDING, owner=None, lease_until=None),
            execution_options={"synchronize_session": False},
        )


def put_profiles(s: Session, measured: Sequence[tuple[ForwardCurve, dict[str, Any]]]) -> None:
    """Store (or replace) each curve's profile row inside transaction `s`; the dict beside
    each curve is engine.curves.device_info of the device that measured it. A key (device,
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


def put_acceptance(s: Session, config_hash: str, r: TrialResult) -> None:
    """Store an acceptance trial's measured profile inside transaction `s`, unless its key has
    one already (the first measurement stands: the Sequoia trials of that key built from it)."""
    for m in (p["acceptance"] for p in r.profiles):
        key = {k: m[k] for k in ACCEPTANCE_KEY}
        if s.scalar(select(AcceptanceProfile.id).filter_by(**key)) is not None:
            continue
        s.add(
            AcceptanceProfile(
                **key,
                profile=list(m["profile"]),
                positions=int(m["positions"]),
                protocol=m["protocol"],
                config_hash=config_hash,
                device_name=r.device_name[:200],
                host=r.host[:200],
                code_version=r.code_version[:80],
                seconds=float(m["seconds"]),
            )
        )
        s.flush()


def acceptance_profile(s: Session, key: dict[str, Any]) -> tuple[float, ...] | None:
    """The stored acceptance profile of `key` (orchestrator.acceptance.key), or None."""
    row = s.scalar(select(AcceptanceProfile.profile).filter_by(**key))
    return None if row is None else tuple(float(p) for p in row)


ACCEPTANCE_KEY = (
    "target",
    "draft",
    "dtype",
    "draft_dtype",
    "dataset",
    "temperature",
    "top_p",
    "draft_temperature",
    "draft_top_p",
    "width",
)


def _insert_result(
    s: Session, trial_id: int, stored_hash: str, status: TrialStatus, r: TrialResult
) -> bool:
    """Insert the trial's `results` row; False when it has one already (a duplicate)."""
    if status != TrialStatus.DONE:  # measured again (rerun): the new result replaces
        s.execute(delete(Result).where(Result.trial_id == trial_id))  # the old one
    inserted = s.scalar(
        insert(s, Result)
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
