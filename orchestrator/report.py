"""Questions to the database, answered with pandas: query, compare, export, and rendering.

One frame row per finished trial: its resolved config flattened (params as `param.<name>`;
`export_frame` and `orchestrator.load` name them `params.<name>`, as MLflow does), where it
ran, and every metric column. `speedup` = the trial's throughput over the mean throughput of
the autoregressive trials with the same pair, dataset slice, sampling settings,
max_new_tokens, device and dtype (all repeats); NaN where the sweep has no such baseline.
Reports read one sweep: the one named, else the most recently updated (`all_sweeps`: every
trial in the database).
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy import func, select

from db.models import METRIC_COLUMNS, Result, Sweep, SweepTrial, Trial
from engine.config import ConfigError
from orchestrator.records import HASH_DEFAULTS
from orchestrator.store import Store
from orchestrator.store_sql import StoreError

BASELINE = "autoregressive"
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
}
SETTINGS = [
    "target",
    "draft",
    "dataset",
    "prompts",
    "category",
    "prompt_tokens",
    "chat",
    "temperature",
    "top_p",
    "max_new_tokens",
    "device",
    "dtype",
]
CONFIG_KEY = SETTINGS + ["engine", "draft_dtype", "method", "params"]
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
) -> pd.DataFrame:
    """Every finished trial of `sweep` (default: the most recent sweep; `all_sweeps`: every
    sweep) with config, placement and metrics; `details`: per-prompt and per-iteration JSON,
    `per_prompt`: the per-prompt JSON only."""
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
        rec = {
            "trial_id": r["id"],
            "config_hash": r["config_hash"],
            **cfg,
            "pair": f"{cfg['target']}/{cfg['draft']}",
            "params": ",".join(f"{k}={v}" for k, v in sorted(params.items())),
            **{f"param.{k}": v for k, v in params.items()},
            **{k: r[k] for k in r.keys() if k not in ("id", "config_hash", "config")},
        }
        records.append(rec)
    df = pd.DataFrame.from_records(records)
    if df.empty:
        where = f" of sweep {sweep!r}" if sweep else ""
        raise QueryError(f"no finished trials{where} in {store.display_url}")
    return add_speedup(df)


def add_speedup(df: pd.DataFrame) -> pd.DataFrame:
    key = settings_key(df)
    is_base = df["method"] == BASELINE
    base = df.loc[is_base, "throughput"].groupby(key[is_base]).mean()
    out = df.copy()
    out["ar_throughput"] = key.map(base).astype(float)
    out["speedup"] = out["throughput"] / out["ar_throughput"]
    return out


def settings_key(df: pd.DataFrame) -> pd.Series:
    """One hashable key per row over SETTINGS (None and NaN alike)."""
    return df[SETTINGS].apply(lambda r: json.dumps([_plain(v) for v in r], default=str), axis=1)


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


def query(
    df: pd.DataFrame,
    best_by: str,
    where: tuple[str, ...] = (),
    top: int | None = 20,
    by_group: bool = True,
) -> pd.DataFrame:
    """Configs (grouped over repeats) ranked by the mean of `best_by`: within each GROUP
    (pair, dataset slice, sampling, device; `rank` restarts at 1), or across all rows when
    `by_group` is False. `top` rows per group; `baseline` marks autoregressive rows. Every
    metric column is there as a mean."""
    if best_by not in BEST_BY:
        raise QueryError(
            f"metric {best_by!r} is not allowed for --best-by (allowed: {', '.join(BEST_BY)})"
        )
    df = apply_where(df, where)
    if df.empty:
        raise QueryError("no finished trials match the --where filters")
    metrics = [m for m in METRIC_COLUMNS if m in df.columns and m not in CONFIG_KEY]
    metrics += ["speedup", "ar_throughput"]
    params = [c for c in df.columns if c.startswith("param.")]
    g = df.groupby(CONFIG_KEY, dropna=False, sort=False)
    out = g.agg(
        repeats=(best_by, "size"),
        **{f"{best_by}_std": (best_by, "std")},
        **{m: (m, "mean") for m in metrics},
        **{c: (c, "first") for c in params},
    ).reset_index()
    out.insert(0, "pair", out["target"] + "/" + out["draft"])
    out["baseline"] = out["method"] == BASELINE
    out["group"] = _group_label(out) if by_group else "all"
    out = out.sort_values(
        best_by, ascending=not BEST_BY[best_by], na_position="last", kind="stable"
    )
    if by_group:  # groups in the order they first appear in the database
        first = _group_label(df.assign(pair=df["target"] + "/" + df["draft"]))
        order = {k: i for i, k in enumerate(dict.fromkeys(first))}
        out = out.sort_values("group", key=lambda c: c.map(order), kind="stable")
    out.insert(0, "rank", out.groupby("group", sort=False).cumcount() + 1)
    if top:
        out = out[out["rank"] <= top]
    return out.reset_index(drop=True)


def _group_label(df: pd.DataFrame) -> pd.Series:
    """One line naming a row's group for `query`: every SETTINGS field but max_new_tokens
    (pair, dataset slice, sampling, device and dtype)."""

    def label(r) -> str:
        data = f"{r['dataset']} ({r['prompts']} prompts"
        data += f", {r['category']})" if _plain(r["category"]) is not None else ")"
        if _plain(r["prompt_tokens"]) is not None:
            data += f" <= {r['prompt_tokens']} prompt tokens"
        if _plain(r["chat"]) is not None:
            data += " chat" if r["chat"] else " plain"
        sampling = f"T={r['temperature']:g}" + (
            f" top_p={r['top_p']:g}" if r["top_p"] != 1.0 else ""
        )
        return f"{r['pair']} · {data} · {sampling} · {r['device']}/{r['dtype']}"

    return df.apply(label, axis=1)


def compare(df: pd.DataFrame, where: tuple[str, ...] = ()) -> pd.DataFrame:
    """Each method's best config (by mean speedup) per pair and setting: its params, speedup,
    the spread of that speedup over prompts x repeats (per-prompt speedups against the
    baseline's mean on the same prompt; over repeats alone when the frame has no per-prompt
    data), tau and acceptance, and `speedup.<task>` per Spec-Bench task or category (pooled
    tokens / time over that task's prompts, over the baseline's) where the dataset has
    several. With a `predicted_speedup` column (orchestrator/profiles.py predict_frame), its
    mean per config comes beside the measured one."""
    predicted = "predicted_speedup" in df.columns
    df = apply_where(df, where)
    df = df[df["speedup"].notna()]
    if df.empty:
        raise QueryError(
            "no trial has an autoregressive baseline with the same pair, dataset, "
            "sampling and max_new_tokens; add `- name: autoregressive` to the sweep"
        )
    df = df.assign(_config=config_key(df), _skey=settings_key(df))
    g = (
        df.groupby(CONFIG_KEY, dropna=False, sort=False)
        .agg(
            speedup=("speedup", "mean"),
            speedup_std=("speedup", "std"),
            speedup_min=("speedup", "min"),
            speedup_max=("speedup", "max"),
            samples=("speedup", "size"),
            throughput=("throughput", "mean"),
            ar_throughput=("ar_throughput", "mean"),
            tokens_per_iteration=("tokens_per_iteration", "mean"),
            acceptance_rate=("acceptance_rate", "mean"),
            repeats=("speedup", "size"),
            _config=("_config", "first"),
            **({"predicted_speedup": ("predicted_speedup", "mean")} if predicted else {}),
        )
        .reset_index()
    )
    g["pair"] = g["target"] + "/" + g["draft"]
    best = (
        g.sort_values("speedup", ascending=False, kind="stable")
        .groupby(SETTINGS + ["method"], dropna=False, sort=False)
        .head(1)
    )
    order = {m: i for i, m in enumerate(dict.fromkeys([BASELINE, *df["method"]]))}
    best = best.assign(_o=best["method"].map(order)).sort_values(["_o", "pair"], kind="stable")
    best = best.reset_index(drop=True)
    categories: list[str] = []
    if "per_prompt" in df.columns:
        pf = prompt_frame(df)
        if not pf.empty:
            best, categories = _prompt_spread(best, pf)
    best["spread_over"] = "prompts x repeats" if "per_prompt" in df.columns else "repeats"
    cols = [
        "method",
        "pair",
        "dataset",
        "category",
        "temperature",
        "max_new_tokens",
        "device",
        "engine",
        "speedup",
        "speedup_std",
        "speedup_min",
        "speedup_max",
        "samples",
        "spread_over",
        "throughput",
        "ar_throughput",
        "tokens_per_iteration",
        "acceptance_rate",
        "params",
        "repeats",
        *(["predicted_speedup"] if predicted else []),
        *[f"speedup.{c}" for c in categories],
    ]
    return best[cols]


# measured (device-specific) columns of `compare`: profiles.compare_predicted blanks them when
# the trials ran on another kind of device than the predicted one
MEASURED = ["speedup", "speedup_std", "speedup_min", "speedup_max", "throughput", "ar_throughput"]


def config_key(df: pd.DataFrame) -> pd.Series:
    """One hashable key per row over CONFIG_KEY."""
    return df[CONFIG_KEY].apply(lambda r: json.dumps([_plain(v) for v in r], default=str), axis=1)


@functools.lru_cache(maxsize=None)
def _tasks(dataset: str) -> dict[str, str]:
    from engine.datasets import task_of

    return task_of(dataset)


def prompt_frame(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (trial, prompt) from `per_prompt`: _config, _skey, method, id, task (the
    Spec-Bench task of its category; the category elsewhere), new_tokens, total_s. Prompts
    recorded without timings are left out."""
    rows = []
    cols = [df[c] for c in ("_config", "_skey", "method", "dataset", "per_prompt")]
    for config, skey, method, dataset, per_prompt in zip(*cols):
        tasks = _tasks(dataset)
        for p in per_prompt or []:
            if not isinstance(p, dict) or not p.get("total_s") or "new_tokens" not in p:
                continue
            cat = p.get("category")
            rows.append(
                {
                    "_config": config,
                    "_skey": skey,
                    "method": method,
                    "id": str(p.get("id")),
                    "task": tasks.get(cat, cat) if cat is not None else None,
                    "new_tokens": p["new_tokens"],
                    "total_s": p["total_s"],
                }
            )
    return pd.DataFrame(
        rows, columns=["_config", "_skey", "method", "id", "task", "new_tokens", "total_s"]
    )


def _prompt_spread(best: pd.DataFrame, pf: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """`best` with the per-prompt speedup spread and per-task speedups of each winner."""
    pf = pf.assign(tp=pf["new_tokens"] / pf["total_s"])
    base = pf[pf["method"] == BASELINE]
    ar = base.groupby(["_skey", "id"])["tp"].mean().rename("ar_tp")
    pf = pf.join(ar, on=["_skey", "id"])
    pf["speedup"] = pf["tp"] / pf["ar_tp"]
    mine = pf[pf["_config"].isin(best["_config"]) & pf["speedup"].notna()]
    spread = mine.groupby("_config")["speedup"].agg(["std", "min", "max", "size"])
    best = best.copy()
    for col, agg in (("speedup_std", "std"), ("speedup_min", "min"), ("speedup_max", "max")):
        best[col] = best["_config"].map(spread[agg]).fillna(best[col])
    best["samples"] = best["_config"].map(spread["size"]).fillna(best["samples"]).astype(int)
    tasks = list(dict.fromkeys(t for t in pf["task"] if t is not None))
    if len(tasks) < 2:
        return best, []

    def pooled(frame: pd.DataFrame, key: str) -> pd.Series:
        s = frame.groupby([key, "task"])[["new_tokens", "total_s"]].sum()
        return s["new_tokens"] / s["total_s"]

    method_tp, ar_tp = pooled(mine, "_config"), pooled(base, "_skey")
    for t in tasks:
        best[f"speedup.{t}"] = [
            method_tp.get((c, t), math.nan) / ar_tp.get((k, t), math.nan)
            for c, k in zip(best["_config"], best["_config"].map(_config_skey(pf)))
        ]
    return best, tasks


def _config_skey(pf: pd.DataFrame) -> dict[str, str]:
    return dict(zip(pf["_config"], pf["_skey"]))


def export_frame(df: pd.DataFrame) -> pd.DataFrame:
    """The rows `orch export` and `orchestrator.load` give: one per finished trial, method
    parameters as `params.<name>` (MLflow's naming; `params` holds them all as `k=v,...`)."""
    out = df.drop(columns=["pair"], errors="ignore")
    return out.rename(columns={c: "params." + c[6:] for c in out.columns if c.startswith("param.")})


def check_output_file(path: str) -> None:
    """QueryError (one line) unless a file can be written at `path`: its folder exists, is a
    folder and is writable, and `path` is not a folder or a read-only file."""
    p = Path(path)
    folder = p.parent
    if p.is_dir():
        raise QueryError(f"cannot write {path}: it is a folder")
    if not folder.exists():
        raise QueryError(f"cannot write {path}: folder {folder} does not exist")
    if not folder.is_dir():
        raise QueryError(f"cannot write {path}: {folder} is not a folder")
    if p.exists() and not os.access(p, os.W_OK):
        raise QueryError(f"cannot write {path}: the file is read-only")
    if not p.exists() and not os.access(folder, os.W_OK):
        raise QueryError(f"cannot write {path}: folder {folder} is not writable")


def check_output_dir(path: str | Path, what: str = "plots") -> None:
    """QueryError (one line) unless `what` can be written into folder `path`, made if needed."""
    p = Path(path)
    if p.exists():
        if not p.is_dir():
            raise QueryError(f"cannot write {what} to {path}: it is not a folder")
        if not os.access(p, os.W_OK):
            raise QueryError(f"cannot write {what} to {path}: folder {p} is not writable")
        return
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise QueryError(f"cannot write {what} to {path}: {parent} is not a folder")
    if not os.access(parent, os.W_OK):
        raise QueryError(f"cannot write {what} to {path}: folder {parent} is not writable")


def write_export(df: pd.DataFrame, fmt: str, out: str | None, stdout) -> None:
    try:
        _write_export(df, fmt, out, stdout)
    except OSError as e:  # the checks passed, but the disk said no (full, gone, ...)
        raise QueryError(f"cannot write {out or 'stdout'}: {e.strerror or e}") from None


def _write_export(df: pd.DataFrame, fmt: str, out: str | None, stdout) -> None:
    if fmt == "csv":
        data = df.assign(
            **{c: df[c].map(json.dumps) for c in ("per_prompt", "per_iteration") if c in df.columns}
        )
        text = data.to_csv(index=False)
    elif fmt == "json":
        text = json.dumps(to_records(df)) + "\n"
    elif fmt == "parquet":
        data = df.copy()
        for c in data.columns:
            if c in ("per_prompt", "per_iteration"):
                data[c] = data[c].map(json.dumps)
            elif data[c].dtype == object and data[c].map(type).nunique() > 1:
                data[c] = data[c].map(lambda v: None if v is None else str(v))
        if out:
            data.to_parquet(out, index=False)
        else:
            stdout.buffer.write(data.to_parquet(index=False))
        return
    else:
        raise QueryError(f"unknown export format {fmt!r} (known: csv, json, parquet)")
    if out:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        stdout.write(text)


def to_records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """JSON-ready rows: NaN -> None, numpy scalars -> Python."""
    out = []
    for rec in df.to_dict(orient="records"):
        out.append({k: _plain(v) for k, v in rec.items()})
    return out


def _plain(v: Any) -> Any:
    if hasattr(v, "item") and not isinstance(v, (list, dict, str)):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def render(df: pd.DataFrame, fmt: str) -> str:
    """table | json (one list of row objects) | csv."""
    if fmt == "json":
        return json.dumps(to_records(df))
    if fmt == "csv":
        return df.to_csv(index=False).rstrip("\n")
    if df.empty:
        return "(no rows)"
    cells = [[_cell(v) for v in row] for row in df.itertuples(index=False)]
    cols = [str(c) for c in df.columns]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)) for r in cells]
    return "\n".join(line.rstrip() for line in lines)


def _cell(v: Any) -> str:
    v = _plain(v)
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e6 else f"{v:.4e}"
    return str(v)


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
