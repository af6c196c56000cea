"""When a sweep is finished (handle.py).

A sweep is finished once every trial of it is done or failed, whoever ran them: recording an
outcome settles every sweep that contains the trial.
"""

from __future__ import annotations

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from db.models import Sweep, SweepStatus, SweepTrial, Trial, TrialStatus
from orchestrator.store.sql import ENDED, UNSETTLED, members


def settled(s: Session, sweep_id: int) -> bool:
    """Every trial of the sweep is done or failed."""
    return (
        s.scalar(
            select(func.count())
            .select_from(Trial)
            .where(Trial.id.in_(members(sweep_id)), Trial.status.in_(UNSETTLED))
        )
        == 0
    )


def end_status(s: Session, sweep_id: int) -> SweepStatus:
    """The status of a settled sweep: failed when its trials all failed, else finished."""
    of = (Trial.id.in_(members(sweep_id)),)
    failed = Trial.status == TrialStatus.FAILED
    done = s.scalar(select(func.count()).select_from(Trial).where(*of, ~failed))
    failed = s.scalar(select(func.count()).select_from(Trial).where(*of, failed))
    return SweepStatus.FAILED if failed and not done else SweepStatus.FINISHED


def settle(s: Session, trial_id: int) -> None:
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
