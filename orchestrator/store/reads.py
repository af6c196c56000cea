"""Read queries of the store (handle.py): a sweep, its --only cut, the trial
counts `orch status` shows, trial lists and finish times. Each function runs inside the one
transaction of a `Store.transact` call; `url` (redacted) names the database in errors."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from db.models import Sweep, SweepStatus, SweepTrial, Trial, TrialStatus
from orchestrator.only import Only, matches
from orchestrator.records import PROFILE, TrialConfig
from orchestrator.store.leases import LEASE_S
from orchestrator.store.sql import StoreError, members, now


def sweep(
    s: Session, url: str, name: str | None = None, sweep_id: int | None = None
) -> dict[str, Any]:
    """Sweep `name` (or `sweep_id`; else the most recently updated) as a dict."""
    q = select(Sweep)
    if sweep_id is not None:
        q = q.where(Sweep.id == sweep_id)
    elif name:
        q = q.where(Sweep.name == name)
    else:
        q = q.order_by(Sweep.updated_at.desc(), Sweep.id.desc())
    row = s.scalars(q.limit(1)).first()
    if row is None:
        raise StoreError(f"no sweep named {name!r} in {url}" if name else f"no sweeps in {url}")
    return {c.name: getattr(row, c.name) for c in Sweep.__table__.columns}


def sweep_status(s: Session, sweep_id: int) -> SweepStatus:
    return s.scalar(select(Sweep.status).where(Sweep.id == sweep_id))


def cut(s: Session, sweep_id: int) -> tuple[tuple[Only, ...], int] | None:
    """The --only cut of the sweep's latest run and how many of its trials are still
    pending or running; None when that run took the whole grid."""
    only = s.scalar(select(Sweep.only).where(Sweep.id == sweep_id))
    if not only:
        return None
    rows = s.execute(
        select(Trial.status, Trial.config).where(
            Trial.id.in_(members(sweep_id)),
            Trial.status.in_((TrialStatus.PENDING, TrialStatus.RUNNING)),
        )
    ).all()
    filters = tuple(Only(key, tuple(values)) for key, values in only)
    left = sum(
        status == TrialStatus.RUNNING or matches(TrialConfig.from_dict(config), filters)
        for status, config in rows
    )
    return filters, left


def counts(s: Session, url: str, name: str | None = None) -> list[dict[str, Any]]:
    """One row per sweep: status and trial counts by status. A sweep stored as running
    whose drivers have all stopped heartbeating (killed) shows as interrupted."""
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
    found, clock = s.execute(q).all(), s.scalar(select(now(s)))
    rows: dict[str, dict[str, Any]] = {}
    for sweep_name, status, driver, beat, updated, tstatus, n in found:
        if status == SweepStatus.RUNNING and (beat is None or beat < clock - LEASE_S):
            status, driver = SweepStatus.INTERRUPTED, None
        r = rows.setdefault(
            sweep_name,
            {
                "sweep": sweep_name,
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
        sweep(s, url, name)  # raises when unknown
    return list(rows.values())


def trials(s: Session, sweep_id: int, statuses: tuple[TrialStatus, ...]) -> list[dict[str, Any]]:
    return [
        {
            "trial": t.id,
            "status": t.status,
            "config": TrialConfig.from_dict(t.config).label(),
            "attempts": t.attempts,
            "worker": t.worker_host,
            "gpu": t.gpu_id,
            "driver": t.owner,
            "error": error_line(t.error),
        }
        for t in _sweep_trials(s, sweep_id, Trial.status.in_(statuses))
    ]


def _sweep_trials(s: Session, sweep_id: int, condition) -> list[Trial]:
    """The sweep's trials that meet `condition`, in id order."""
    return s.scalars(
        select(Trial).where(Trial.id.in_(members(sweep_id)), condition).order_by(Trial.id)
    ).all()


def configs(s: Session, sweep_id: int) -> list[TrialConfig]:
    """Every trial config of the sweep (for `--only`, orchestrator/only.py)."""
    return [
        TrialConfig.from_dict(c)
        for c in s.scalars(
            select(Trial.config).where(Trial.id.in_(members(sweep_id))).order_by(Trial.id)
        )
    ]


def profile_trials(s: Session, sweep_id: int) -> list[dict[str, Any]]:
    """The sweep's profile trials (records.PROFILE), whatever their status, with the
    device that measured each one done."""
    rows = _sweep_trials(s, sweep_id, Trial.method == PROFILE)
    return [
        {
            "trial": t.id,
            "status": t.status,
            "profile": TrialConfig.from_dict(t.config).label(),
            "device": t.device_name or "",
            "worker": t.worker_host or "",
            "error": error_line(t.error),
        }
        for t in rows
    ]


def finish_times(s: Session, name: str, last: int = 20) -> list[tuple[float, float]]:
    """(started_at, finished_at) of sweep `name`'s `last` most recently finished trials
    (done or failed), newest first: what `orch status` estimates the time left from."""
    sweep_id = s.scalar(select(Sweep.id).where(Sweep.name == name))
    rows = s.execute(
        select(Trial.started_at, Trial.finished_at)
        .where(
            Trial.id.in_(members(sweep_id)),
            Trial.status.in_((TrialStatus.DONE, TrialStatus.FAILED)),
            Trial.started_at.is_not(None),
            Trial.finished_at.is_not(None),
        )
        .order_by(Trial.finished_at.desc())
        .limit(last)
    ).all()
    return [(float(a), float(b)) for a, b in rows]


# a Python exception's line: "ValueError: ...", "ray.exceptions.OutOfMemoryError: ...",
# "ray.exceptions.RayTaskError(ValueError): ..."
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)(\([\w.]*\))?: ")


def error_line(text: str | None) -> str:
    """The line of a stored error that says what went wrong: the last exception line of its
    traceback (Ray puts pages of memory statistics after an OutOfMemoryError's), else its
    last line."""
    lines = (text or "").strip().splitlines()
    raised = [line for line in lines if _EXCEPTION.match(line)]
    return (raised[-1] if raised else lines[-1]).strip() if lines else ""
