"""`orch submit --dry-run`: what a submission would run, with nothing written. The sweep file
is checked as `orch submit` checks it (every grid point resolved, the --only cut, devices
placed), then the database is only read: per method, its trials, how many are already done
(or failed: they run again only with --retry-failed), how many would run, and the time they
would take, estimated from past trials of the same configs.

Estimate per trial to run: the mean trial time (trials.wall_s) of done trials with the same
method, pair, dataset slice, new tokens, device and engine; failing those, the same method,
pair and device at their time per new token and prompt, times this trial's tokens x prompts;
else none (the count of estimated trials says how many had one). Trial time, summed: with
several workers the sweep takes about that over their number.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from sqlalchemy import select

from db.models import Trial, TrialStatus
from db.session import redact, resolve_url
from orchestrator.only import check_only, matches
from orchestrator.records import TrialConfig
from orchestrator.run.eta import format_eta
from orchestrator.run.preflight import place_trials
from orchestrator.spec import load_sweep
from orchestrator.store import Store, StoreError

CHUNK = 500  # config hashes per IN (...) query


def dry_run(
    path: str | Path,
    url: str | None,
    opts: Any,
    scaled: bool = False,
    rerun: bool = False,
) -> tuple[list[dict[str, Any]], str]:
    """(one row per method, the summary line) for submitting `path` to `url`; reads only."""
    sweep, trials = load_sweep(path, local_models=opts.address is None, scaled=scaled)
    if opts.only:
        check_only(opts.only, trials, sweep.name)
    trials = place_trials(trials, opts)
    store = _reader(url)
    where = store.display_url if store else f"{redact(resolve_url(url))} (no database yet)"
    try:
        status, past = _read(store, [t.config_hash for t in trials]) if store else ({}, [])
    finally:
        if store:
            store.close()
    exact, rate = _estimators(past)
    rows: dict[str, dict[str, Any]] = {}
    for t in trials:
        r = rows.setdefault(t.method, {"method": t.method, "trials": 0, "done": 0, "failed": 0,
                                       "to_run": 0, "estimated": 0, "est_s": 0.0})  # fmt: skip
        r["trials"] += 1
        state = status.get(t.config_hash)
        r["done"] += state == TrialStatus.DONE
        r["failed"] += state == TrialStatus.FAILED
        runs = (
            matches(t, opts.only)
            and (state != TrialStatus.DONE or rerun)
            and (state != TrialStatus.FAILED or opts.retry_failed or rerun)
        )
        if not runs:
            continue
        r["to_run"] += 1
        est = exact.get(_key(t)) or _by_rate(rate, t)
        if est is not None:
            r["estimated"] += 1
            r["est_s"] += est
    out = list(rows.values())
    for r in out:
        r["est"] = format_eta(r["est_s"]) if r["estimated"] else "-"
        r["est_s"] = round(r["est_s"], 1)
    total = sum(r["to_run"] for r in out)
    done = sum(r["done"] for r in out)
    est = sum(r["est_s"] for r in out)
    n_est = sum(r["estimated"] for r in out)
    line = (
        f"sweep {sweep.name!r} in {where}: {len(trials)} trials, {done} already done, "
        f"{total} would run"
    )
    if total:
        line += (
            f"; estimated {format_eta(est)} of trial time for {n_est} of them (past trials of "
            "the same configs; divide by the workers)"
            if n_est
            else "; no past trials of these configs to estimate their time from"
        )
    return out, line + ". Nothing was written (--dry-run)."


def _reader(url: str | None) -> Store | None:
    """The database, read-only; None where the SQLite file does not exist yet."""
    try:
        return Store(url, mode="read")
    except StoreError as e:
        if str(e).startswith("no database file"):
            return None
        raise


def _read(store: Store, hashes: list[str]) -> tuple[dict[str, TrialStatus], list[tuple]]:
    """Each known hash's status, and every done trial's (config, wall_s)."""

    def read(s):
        status = {}
        for i in range(0, len(hashes), CHUNK):
            q = select(Trial.config_hash, Trial.status).where(
                Trial.config_hash.in_(hashes[i : i + CHUNK])
            )
            status.update(dict(s.execute(q).all()))
        past = s.execute(
            select(Trial.config, Trial.wall_s).where(
                Trial.status == TrialStatus.DONE, Trial.wall_s.is_not(None)
            )
        ).all()
        return status, past

    return store.transact("reading past trials", read)


def _key(t: TrialConfig) -> tuple:
    return (t.method, t.target, t.draft, t.dataset, t.prompts, t.category, t.prompt_tokens,
            t.max_new_tokens, t.device, t.engine)  # fmt: skip


def _estimators(past: list[tuple]) -> tuple[dict[tuple, float], dict[tuple, float]]:
    """(exact key -> mean trial seconds, (method, pair, device) -> seconds per token-prompt)."""
    exact: dict[tuple, list[float]] = defaultdict(list)
    rate: dict[tuple, list[float]] = defaultdict(list)
    for config, wall_s in past:
        try:
            t = TrialConfig.from_dict(config)
        except (KeyError, TypeError, ValueError):
            continue
        exact[_key(t)].append(float(wall_s))
        rate[(t.method, t.target, t.draft, t.device)].append(
            float(wall_s) / max(1, t.max_new_tokens * t.prompts)
        )
    mean = lambda v: sum(v) / len(v)  # noqa: E731
    return {k: mean(v) for k, v in exact.items()}, {k: mean(v) for k, v in rate.items()}


def _by_rate(rate: dict[tuple, float], t: TrialConfig) -> float | None:
    r = rate.get((t.method, t.target, t.draft, t.device))
    return None if r is None else r * t.max_new_tokens * t.prompts
