"""The SQL pieces every store module shares (handle.py and the other store modules): the
error type, the trial status groups, the database's clock and dialect-specific insert, and the
chunking of long id lists."""

from __future__ import annotations

from sqlalchemy import Float, cast, extract, func, select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from db.models import SweepStatus, SweepTrial, TrialStatus
from engine.config import ConfigError

OPEN = (TrialStatus.PENDING, TrialStatus.RUNNING)  # trials a sweep still has to run
# A sweep holding any of these is not finished (cancelled trials wait for a resume).
UNSETTLED = (TrialStatus.PENDING, TrialStatus.RUNNING, TrialStatus.CANCELLED)
ENDED = (SweepStatus.FINISHED, SweepStatus.FAILED)  # every trial of the sweep done or failed
_CHUNK = 400


class StoreError(ConfigError):
    """A database problem or a request the database cannot satisfy, as one line."""


def now(s: Session):
    """The database's time (unix seconds) as an SQL expression: what leases and heartbeats are
    measured in."""
    if s.get_bind().dialect.name == "postgresql":
        return cast(extract("epoch", func.clock_timestamp()), Float)
    return (func.julianday("now") - 2440587.5) * 86400.0


def insert(s: Session, model):
    """INSERT for the session's dialect (with ON CONFLICT clauses)."""
    dialect = s.get_bind().dialect.name
    if dialect == "postgresql":
        return postgresql_insert(model)
    if dialect == "sqlite":
        return sqlite_insert(model)
    raise StoreError(f"unsupported database dialect {dialect!r}")


def members(sweep_id: int):
    return select(SweepTrial.trial_id).where(SweepTrial.sweep_id == sweep_id)


def chunks(items: list, n: int = _CHUNK):
    for i in range(0, len(items), n):
        yield items[i : i + n]
