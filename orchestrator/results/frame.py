"""Questions to the database, answered with pandas: the results frame (`load_frame`) and its
`--where` filters, and `orch status`'s counts; `query` and `compare` are in query.py,
rendering and export in output.py.

One frame row per finished trial: its resolved config flattened (params as `param.<name>`;
`export_frame` and `orchestrator.load` name them `params.<name>`, as MLflow does), where it
ran (`device_name`, `host`, and `machine`: the device its throughput counts for,
settings.py machine), and every metric column. `speedup` = the trial's throughput over the
mean throughput of the autoregressive trials with the same settings on the same machine
(settings.py: pair, dataset slice, sampling, max_new_tokens, device, dtype, engine, machine;
all repeats); NaN where there is no such baseline, and `speedup_note` says why (never a ratio
across machines). With per-prompt data, each config's bootstrap intervals (intervals.py:
`speedup_lo`, `speedup_hi`, `tau_lo`, `tau_hi`).
Reports read one sweep: the one named, else the most recently updated (`all_sweeps`: every
trial in the database).
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd
from sqlalchemy import func, select

from db.models import METRIC_COLUMNS, Result, Sweep, SweepTrial, Trial, TrialStatus
from engine.config import ConfigError
from orchestrator.records import HASH_DEFAULTS
from orchestrator.results.intervals import add_intervals
from orchestrator.results.settings import BASELINE, SETTINGS, machine, settings_keys
from orchestrator.store import Store, StoreError

# --best-by whitelist: metric -> True when larger is better
BEST_BY = {
    "throughput": True,
    "speedup": True,
    "acceptance_rate": True,
    "tokens_per_iteration": True,
    "mean_accepted_length": True,
    "ttft_s": False,
    "tpot_s": False,
    "total_s": False,
    "peak_memory_bytes": False,
    "overhead_share": False,
    "mean_tree_size": False,
    # `orch query --predict-on DEVICE` only (orchestrator/results/profiles.py add_predictions)
    "predicted_speedup": True,
    "predicted_tpot_s": False,
}
PREDICTED = ("predicted_speedup", "predicted_tpot_s")
_WHERE = re.compile(r"^\s*([\w.]+)\s*(==|=|!=|>=|<=|>|<)\s*(.*?)\s*$")


class QueryError(ConfigError):
    """A question the data cannot answer as asked (bad metric, column, filter)."""


def resolve_sweep(store: Store, sweep: str | None = None, all_sweeps: bool = False) -> str | None:
    """The sweep a report reads: `sweep` (StoreError when unknown), else the most recently
    updated one; None with `all_sweeps` (every trial)."""
    if all_sweeps:
        if sweep:
            raise QueryError("give --sweep NAME or --all-sweeps, not both")
        return None
    return store.sweep(sweep or None)["name"]


def describe_source(store: Store, sweep: str | None, given: bool, trials: int) -> str:
    """The first line of a report: which sweep (and how it was chosen), trials, database."""
    n = store.transact("counting sweeps", lambda s: s.scalar(select(func.count(Sweep.id))))
    where = f"{trials} finished trials in {store.display_url}"
    if sweep is None:
        return f"all {n} sweeps: {where}"
    if given or n == 1:
        return f"sweep {sweep!r}: {where}"
    return f"sweep {sweep!r} (the most recent of {n}; --sweep NAME for another): {where}"


def load_frame(
    store: Store,
    sweep: str | None = None,
    details: bool = False,
    all_sweeps: bool = False,
    per_prompt: bool = False,
    certificates: bool | None = None,
) -> pd.DataFrame:
    """Every finished trial of `sweep` (default: the most recent sweep; `all_sweeps`: every
    sweep) with config, placement and metrics; `details`: per-prompt and per-iteration JSON,
    `per_prompt`: the per-prompt JSON only; with either, each config's bootstrap intervals
    and (unless `certificates` is False) each trial's certificate columns `lossless` and
    `ar_equal` (orchestrator/results/certificates.py)."""
    sweep = resolve_sweep(store, sweep, all_sweeps)
    cols = [
        Trial.id,
        Trial.config_hash,
        Trial.config,
        Trial.attempts,
        Trial.worker_host,
        Trial.gpu_id,
        Trial.device_name,
        Trial.checkpoints,
        Trial.wall_s,
        Trial.load_s,
        Trial.code_version,
        *[getattr(Result, m) for m in METRIC_COLUMNS],
    ]
    if details:
        cols += [Result.per_prompt, Result.per_iteration]
    elif per_prompt:
        cols += [Result.per_prompt]
    q = select(*cols).join(Result, Result.trial_id == Trial.id).order_by(Trial.id)
    if sweep is not None:
        q = q.where(
            Trial.id.in_(select(SweepTrial.trial_id).join(Sweep).where(Sweep.name == sweep))
        )
    rows = store.transact("reading results", lambda s: s.execute(q).mappings().all())
    records = []
    for r in rows:
        cfg = {**HASH_DEFAULTS, **r["config"]}  # fields added later: the old trials' values
        params = cfg.pop("params")
        for k in ("placement", "prompt_file"):  # mappings as `k=v,...` text: keyed and grouped
            if cfg[k] is not None:
                cfg[k] = ",".join(f"{a}={b}" for a, b in sorted(cfg[k].items()))
        rec = {
            "trial_id": r["id"],
            "config_hash": r["config_hash"],
            **cfg,
            "pair": f"{cfg['target']}/{cfg['draft']}",
            "params": ",".join(f"{k}={v}" for k, v in sorted(params.items())),
            **{f"param.{k}": v for k, v in params.items()},
            **{k: r[k] for k in r.keys() if k not in ("id", "config_hash", "config")},
            "host": r["worker_host"],
            "machine": machine(cfg["device"], r["device_name"], r["worker_host"]),
        }
        records.append(rec)
    df = pd.DataFrame.from_records(records)
    if df.empty:
        where = f" of sweep {sweep!r}" if sweep else ""
        raise QueryError(f"no finished trials{where} in {store.display_url}")
    df = add_speedup(df)
    if details or per_prompt:
        df = add_intervals(df)
    if (details or per_prompt) and certificates is not False:
        from orchestrator.results.certificates import (  # lazy: torch (engine.certify)
            add_certificates,
            load_checks,
        )

        df = add_certificates(df, load_checks(store))
    return df


def add_speedup(df: pd.DataFrame) -> pd.DataFrame:
    """`speedup` (throughput over the mean throughput of the baseline trials with the same
    settings and machine), `ar_throughput`, and `speedup_note`: empty where there is a
    baseline, else why not (none with these settings, or none on this machine)."""
    key = settings_keys(df)
    is_base = df["method"] == BASELINE
    base = df.loc[is_base, "throughput"].groupby(key[is_base]).mean()
    out = df.copy()
    out["ar_throughput"] = key.map(base).astype(float)
    out["speedup"] = out["throughput"] / out["ar_throughput"]
    elsewhere = settings_keys(df, [c for c in SETTINGS if c != "machine"])
    has_base = set(elsewhere[is_base])
    out["speedup_note"] = [
        ""
        if ok
        else f"no autoregressive trial on {m}"
        if k in has_base
        else "no autoregressive trial with these settings"
        for ok, k, m in zip(out["ar_throughput"].notna(), elsewhere, out["machine"])
    ]
    return out


def apply_where(df: pd.DataFrame, where: tuple[str, ...] | list[str]) -> pd.DataFrame:
    """Filters like `method=dynatree`, `depth>=4`, `target!=tiny-neox` (params by bare name)."""
    for expr in where:
        m = _WHERE.match(expr)
        if not m:
            raise QueryError(
                f"--where expects COLUMN OP VALUE with OP one of = != < <= > >=, got {expr!r}"
            )
        col, op, value = m.groups()
        col = frame_column(col)
        if col not in df.columns and f"param.{col}" in df.columns:
            col = f"param.{col}"
        if col not in df.columns:
            known = sorted(
                c.removeprefix("param.")
                for c in df.columns
                if c not in ("per_prompt", "per_iteration")
            )
            raise QueryError(f"unknown --where column {col!r} (known: {', '.join(known)})")
        series = df[col]
        numeric = pd.to_numeric(series, errors="coerce")
        try:
            number = float(value)
        except ValueError:
            number = None
        if number is not None and numeric.notna().any():
            lhs, rhs = numeric, number
        elif op in ("=", "==", "!="):
            lhs, rhs = series.astype(str), value
        else:
            raise QueryError(f"--where {expr!r}: {op} needs a number")
        mask = {
            "=": lhs == rhs,
            "==": lhs == rhs,
            "!=": lhs != rhs,
            ">": lhs > rhs,
            ">=": lhs >= rhs,
            "<": lhs < rhs,
            "<=": lhs <= rhs,
        }[op]
        df = df[mask]
    return df


def frame_column(name: str) -> str:
    """`params.k` (the export's name) -> `param.k` (the frame's)."""
    return "param." + name.removeprefix("params.") if name.startswith("params.") else name


def sampling_label(temperature: float, top_p: float) -> str:
    """ "T=1" or "T=1 top_p=0.9": a setting's sampling as the text tables name it."""
    return f"T={temperature:g}" + (f" top_p={top_p:g}" if top_p != 1.0 else "")


def status_frame(store: Store, sweep: str | None) -> pd.DataFrame:
    rows = store.counts(sweep)
    if not rows and sweep is None:
        raise StoreError(f"no sweeps in {store.display_url}")
    return pd.DataFrame(
        rows,
        columns=[
            "sweep",
            "status",
            "trials",
            "done",
            "failed",
            "running",
            "pending",
            "cancelled",
            "driver",
            "updated",
        ],
    )


def progress_line(name: str, counts: dict[str, Any]) -> str:
    """`34 of 453 trials done, 419 pending ...`: how much of the sweep this report covers (a
    run with `orch submit --only` leaves the rest pending)."""
    total, done = counts.get("trials", 0), counts.get(TrialStatus.DONE.value, 0)
    text = f"{done} of {total} trials done"
    rest = [
        f"{counts[s.value]} {s.value}"
        for s in TrialStatus
        if s != TrialStatus.DONE and counts.get(s.value)
    ]
    if rest:
        text += ", " + ", ".join(rest)
    if done < total:
        text += (
            f": only the done trials are reported; orch resume {name} runs the others "
            "(orch submit FILE --only KEY=V a part of them)"
        )
    return text + "."
