"""Sweep writes of a driver (handle.py): submit (create, replace, rerun), cancel,
delete results, and the datasets a sweep reads. Each function runs inside the one transaction
of a `Store.transact` call.

Trials are global rows keyed by `config_hash`, linked to sweeps through `sweep_trials`;
inserts use ON CONFLICT DO NOTHING so concurrent submitters and a repeated submission never
duplicate a trial or a result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from db.models import DatasetInfo, Result, Sweep, SweepStatus, SweepTrial, Trial, TrialStatus
from orchestrator.records import TrialConfig
from orchestrator.store.settle import end_status, settled
from orchestrator.store.sql import ENDED, StoreError, chunks, insert, members


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


def submit(
    s: Session,
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
    for chunk in chunks(trials):
        res = s.execute(
            insert(s, Trial)
            .on_conflict_do_nothing(index_elements=["config_hash"])
            .returning(Trial.id),
            [_trial_row(t) for t in chunk],
        )
        new += len(res.all())
    stmt = insert(s, Sweep).values(
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
    for chunk in chunks(hashes):
        ids.update(
            s.execute(select(Trial.config_hash, Trial.id).where(Trial.config_hash.in_(chunk))).all()
        )
    wanted = {ids[h] for h in hashes}
    linked = set(s.scalars(select(SweepTrial.trial_id).where(SweepTrial.sweep_id == sweep_id)))
    dropped = sorted(linked - wanted)
    for chunk in chunks(dropped):
        s.execute(
            delete(SweepTrial).where(
                SweepTrial.sweep_id == sweep_id, SweepTrial.trial_id.in_(chunk)
            )
        )
    deleted = _delete_orphans(s, dropped)
    missing = sorted(wanted - linked)
    for chunk in chunks(missing):
        s.execute(
            insert(s, SweepTrial).on_conflict_do_nothing(),
            [{"sweep_id": sweep_id, "trial_id": i} for i in chunk],
        )
    done = s.scalar(
        select(func.count())
        .select_from(SweepTrial)
        .join(Trial)
        .where(SweepTrial.sweep_id == sweep_id, Trial.status == TrialStatus.DONE)
    )
    again = _reopen_done(s, s.scalars(members(sweep_id)).all()) if rerun else 0
    status = s.scalar(select(Sweep.status).where(Sweep.id == sweep_id))
    if settled(s, sweep_id):  # every config ran before, here or in another sweep
        status = end_status(s, sweep_id)
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


def cancel(s: Session, name: str, url: str) -> CancelInfo:
    """Cancel the sweep and its pending trials, but not those another sweep that is not
    cancelled contains too; a finished sweep stays as it is."""
    row = s.scalars(select(Sweep).where(Sweep.name == name)).first()
    if row is None:
        raise StoreError(f"no sweep named {name!r} in {url}")
    if settled(s, row.id):
        return CancelInfo(finished=True, cancelled=0, shared=0)
    kept = (
        select(SweepTrial.trial_id)
        .join(Sweep)
        .where(Sweep.id != row.id, Sweep.status != SweepStatus.CANCELLED)
    )
    pending = (Trial.id.in_(members(row.id)), Trial.status == TrialStatus.PENDING)
    n = s.execute(
        update(Trial).where(*pending, Trial.id.not_in(kept)).values(status=TrialStatus.CANCELLED),
        execution_options={"synchronize_session": False},
    ).rowcount
    shared = s.scalar(select(func.count()).select_from(Trial).where(*pending))
    row.status = SweepStatus.CANCELLED
    return CancelInfo(finished=False, cancelled=n, shared=shared or 0)


def shared_trials(s: Session, name: str, trial_ids: list[int]) -> int:
    """How many of `trial_ids` another sweep than `name` holds too."""
    n = 0
    for chunk in chunks(sorted(trial_ids)):
        n += s.scalar(
            select(func.count(func.distinct(SweepTrial.trial_id)))
            .join(Sweep)
            .where(SweepTrial.trial_id.in_(chunk), Sweep.name != name)
        )
    return n


def delete_results(s: Session, trial_ids: list[int]) -> int:
    """Delete the results of the done trials among `trial_ids`, which go back to pending
    (a resume measures them again), in one transaction; returns how many."""
    done = []
    for chunk in chunks(sorted(trial_ids)):
        done += s.scalars(
            select(Trial.id).where(Trial.id.in_(chunk), Trial.status == TrialStatus.DONE)
        ).all()
    for chunk in chunks(done):
        s.execute(delete(Result).where(Result.trial_id.in_(chunk)))
    return _reopen_done(s, done)


def upsert_dataset(s: Session, info: dict[str, Any]) -> None:
    s.execute(
        insert(s, DatasetInfo)
        .values(**info)
        .on_conflict_do_update(index_elements=["name"], set_={**info, "updated_at": func.now()})
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
    for chunk in chunks(trial_ids):
        orphans += s.scalars(
            select(Trial.id).where(
                Trial.id.in_(chunk), Trial.id.not_in(held), Trial.status != TrialStatus.RUNNING
            )
        ).all()
    for chunk in chunks(sorted(orphans)):
        s.execute(delete(Result).where(Result.trial_id.in_(chunk)))
        s.execute(delete(Trial).where(Trial.id.in_(chunk)))
    return len(orphans)


def _reopen_done(s: Session, trial_ids: list[int]) -> int:
    """done -> pending for the trials among `trial_ids`, to be measured again; their results
    stay until the new ones replace them. Every sweep holding one is no longer finished."""
    n = 0
    for chunk in chunks(sorted(trial_ids)):
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
