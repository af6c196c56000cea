"""A sweep page's data (`/api/sweep/NAME`): `orch compare` and `orch query` over the sweep's
results frame (orchestrator.results, the same functions), its trials, failures and running
trials, and the timeline of trials per worker and GPU. Figures are in figures.py."""

from __future__ import annotations

from typing import Any

import pandas as pd

from db.models import Trial, TrialStatus
from orchestrator.records import TrialConfig
from orchestrator.results import (
    BEST_BY,
    QueryError,
    apply_where,
    compare,
    query,
    query_columns,
    varied_params,
)
from orchestrator.results.output import to_records
from orchestrator.store.reads import error_line
from orchestrator.ui.figures import figures
from orchestrator.ui.reader import Reader, version_of

# the trials table: one row per finished trial
TRIAL_COLUMNS = [
    "trial_id",
    "method",
    "pair",
    "params",
    "repeat",
    "speedup",
    "throughput",
    "tokens_per_iteration",
    "acceptance_rate",
    "lossless",
    "host",
    "gpu_id",
]
EMPTY = {
    "compare": [],
    "best": [],
    "configs": [],
    "config_columns": [],
    "trials": [],
    "figures": {},
    "varied": {},
}
BEST_TOP = 3  # configs per group in "best configs per pair"
PAGE_ROWS = 100  # rows of the trials and configs tables per page


def sweep_page(
    reader: Reader, name: str, where: tuple[str, ...], columns: str | None, best_by: str
) -> dict[str, Any]:
    """Everything the sweep page shows, for the sweep's trials that pass `where` (the
    `--where` grammar; QueryError, one line, when it is bad) with the config table's
    `columns` (the `--columns` grammar of `orch query`) ranked by `best_by`."""
    if best_by not in BEST_BY:
        raise QueryError(
            f"metric {best_by!r} is not allowed for best_by (allowed: {', '.join(BEST_BY)})"
        )
    sig = reader.signature(name)
    key = ("page", where, columns, best_by)
    return reader.cached(name, key, lambda: _build(reader, name, where, columns, best_by, sig), sig)


def paged(answer: dict[str, Any], trials_page: int, configs_page: int) -> dict[str, Any]:
    """The answer with one page of its trials and configs tables (and their lengths)."""
    out = dict(answer)
    for key, page in (("trials", trials_page), ("configs", configs_page)):
        rows = answer.get(key) or []
        out[f"{key}_total"] = len(rows)
        out[f"{key}_page"] = page
        out[key] = rows[page * PAGE_ROWS : (page + 1) * PAGE_ROWS]
    out["page_rows"] = PAGE_ROWS
    return out


def _build(reader, name, where, columns, best_by, sig) -> dict[str, Any]:
    df = reader.frame(name, sig)
    out: dict[str, Any] = {
        "name": name,
        "version": version_of(sig),
        "where": list(where),
        "status": status(reader, name),
        "timeline": timeline(reader, name),
    }
    if df is None:
        return {**out, **EMPTY, "finished": 0, "shown": 0, "note": "no finished trials yet"}
    shown = apply_where(df, where)  # a bad filter raises here, before anything else
    out.update(finished=len(df), shown=len(shown), columns=_column_names(df))
    if shown.empty:
        return {**out, **EMPTY, "note": "no finished trials match the filters"}
    out["trials"] = to_records(shown[[c for c in TRIAL_COLUMNS if c in shown.columns]])
    out["compare"], out["note"] = _compare(shown)
    ranked = query(shown, best_by, (), None)
    cols = query_columns(best_by, columns, ranked)
    keep = list(dict.fromkeys(["group", "pair", *cols, "baseline"]))
    out["configs"] = to_records(ranked[keep])
    out["config_columns"] = cols
    out["best_by"] = best_by
    by_speedup = ranked if best_by == "speedup" else query(shown, "speedup", (), None)
    best = by_speedup[by_speedup["rank"] <= BEST_TOP]
    out["best"] = to_records(
        best[
            [
                c
                for c in (
                    "group",
                    "rank",
                    "method",
                    "speedup",
                    "speedup_lo",
                    "speedup_hi",
                    "tokens_per_iteration",
                    "params",
                )
                if c in best.columns
            ]
        ]
    )
    out["varied"] = varied_params(shown)
    out["figures"] = figures(shown, by_speedup)
    return out


def _compare(df: pd.DataFrame) -> tuple[list[dict], str]:
    """compare() as records; a sweep without a baseline gets its one-line reason."""
    try:
        return to_records(compare(df)), ""
    except QueryError as e:
        return [], str(e)


def _column_names(df: pd.DataFrame) -> list[str]:
    """Every column a filter or the column picker may name (params by their bare name)."""
    skip = {"per_prompt", "per_iteration", "checkpoints"}
    return sorted(c.removeprefix("param.") for c in df.columns if c not in skip)


def status(reader: Reader, name: str) -> dict[str, Any]:
    """Counts by status, the failed trials with the line of their error that says what went
    wrong, and the running ones with where they run."""
    counts = (reader.store.counts(name) or [{}])[0]
    rows = reader.trial_rows(
        name,
        [
            Trial.id,
            Trial.status,
            Trial.config,
            Trial.attempts,
            Trial.worker_host,
            Trial.gpu_id,
            Trial.error,
        ],
        Trial.status.in_((TrialStatus.FAILED, TrialStatus.RUNNING)),
    )
    listed = [
        {
            "trial": r["id"],
            "status": str(r["status"]),
            "config": TrialConfig.from_dict(r["config"]).label(),
            "attempts": r["attempts"],
            "host": r["worker_host"] or "",
            "gpu": r["gpu_id"] or "",
            "error": error_line(r["error"]),
        }
        for r in rows
    ]
    return {
        "counts": {k: (str(v) if k == "status" else v) for k, v in counts.items()},
        "failed": [r for r in listed if r["status"] == TrialStatus.FAILED.value],
        "running": [r for r in listed if r["status"] == TrialStatus.RUNNING.value],
    }


def timeline(reader: Reader, name: str) -> dict[str, Any]:
    """The workers (host and GPU) and one bar per started trial: [trial, worker index, start,
    end (None while it runs), status, method] (unix seconds)."""
    rows = reader.trial_rows(
        name,
        [
            Trial.id,
            Trial.status,
            Trial.method,
            Trial.worker_host,
            Trial.gpu_id,
            Trial.started_at,
            Trial.finished_at,
        ],
        Trial.started_at.is_not(None),
    )
    workers = sorted({_worker(r) for r in rows})
    index = {w: i for i, w in enumerate(workers)}
    return {
        "workers": workers,
        "bars": [
            [r["id"], index[_worker(r)], r["started_at"], r["finished_at"], str(r["status"]),
             r["method"]]
            for r in rows
        ],
    }  # fmt: skip


def _worker(r: dict[str, Any]) -> str:
    return f"{r['worker_host'] or '?'}" + (f" gpu {r['gpu_id']}" if r["gpu_id"] else "")
