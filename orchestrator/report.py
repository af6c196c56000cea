"""Questions to the database, answered with pandas: query, compare, export, and rendering.

One frame row per finished trial: its resolved config flattened (params as `param.<name>`),
where it ran, and every metric column. `speedup` = the trial's throughput over the mean
throughput of the autoregressive trials with the same pair, dataset slice, sampling settings,
max_new_tokens, device and dtype (all repeats); NaN where the sweep has no such baseline.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy import select

from db.models import METRIC_COLUMNS, Result, Sweep, SweepTrial, Trial
from engine.config import ConfigError
from orchestrator.store import Store, StoreError

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
CONFIG_KEY = SETTINGS + ["method", "params"]
_WHERE = re.compile(r"^\s*([\w.]+)\s*(==|=|!=|>=|<=|>|<)\s*(.*?)\s*$")


class QueryError(ConfigError):
    """A question the data cannot answer as asked (bad metric, column, filter)."""


def load_frame(store: Store, sweep: str | None = None, details: bool = False) -> pd.DataFrame:
    """Every finished trial (of `sweep` when given) with config, placement and metrics."""
    cols = [
        Trial.id,
        Trial.config_hash,
        Trial.config,
        Trial.attempts,
        Trial.worker_host,
        Trial.gpu_id,
        Trial.device_name,
        Trial.wall_s,
        Trial.load_s,
        Trial.code_version,
        *[getattr(Result, m) for m in METRIC_COLUMNS],
    ]
    if details:
        cols += [Result.per_prompt, Result.per_iteration]
    q = select(*cols).join(Result, Result.trial_id == Trial.id).order_by(Trial.id)
    if sweep:
        store.sweep(sweep)  # StoreError when unknown
        q = q.where(
            Trial.id.in_(select(SweepTrial.trial_id).join(Sweep).where(Sweep.name == sweep))
        )
    rows = store.transact("reading results", lambda s: s.execute(q).mappings().all())
    records = []
    for r in rows:
        cfg = dict(r["config"])
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


def query(
    df: pd.DataFrame, best_by: str, where: tuple[str, ...] = (), top: int | None = 20
) -> pd.DataFrame:
    """Configs (grouped over repeats) ranked by the mean of `best_by`."""
    if best_by not in BEST_BY:
        raise QueryError(
            f"metric {best_by!r} is not allowed for --best-by (allowed: {', '.join(BEST_BY)})"
        )
    df = apply_where(df, where)
    if df.empty:
        raise QueryError("no finished trials match the --where filters")
    extra = [
        m
        for m in ("throughput", "speedup", "acceptance_rate", "tokens_per_iteration")
        if m != best_by
    ]
    g = df.groupby(CONFIG_KEY, dropna=False, sort=False)
    out = g.agg(
        repeats=(best_by, "size"),
        **{best_by: (best_by, "mean")},
        **{f"{best_by}_std": (best_by, "std")},
        **{m: (m, "mean") for m in extra},
    )
    out = out.reset_index().sort_values(
        best_by, ascending=not BEST_BY[best_by], na_position="last", kind="stable"
    )
    cols = [
        "method",
        "params",
        "target",
        "draft",
        "dataset",
        "temperature",
        "max_new_tokens",
        "repeats",
        best_by,
        f"{best_by}_std",
        *extra,
    ]
    out = out[cols]
    return out.head(top) if top else out


def compare(df: pd.DataFrame, where: tuple[str, ...] = ()) -> pd.DataFrame:
    """Methods x pairs: each method's best config (by mean speedup) per pair and setting.
    With a `predicted_speedup` column (orchestrator/profiles.py predict_frame), its mean per
    config comes beside the measured one."""
    predicted = "predicted_speedup" in df.columns
    df = apply_where(df, where)
    df = df[df["speedup"].notna()]
    if df.empty:
        raise QueryError(
            "no trial has an autoregressive baseline with the same pair, dataset, "
            "sampling and max_new_tokens; add `- name: autoregressive` to the sweep"
        )
    g = (
        df.groupby(CONFIG_KEY, dropna=False, sort=False)
        .agg(
            speedup=("speedup", "mean"),
            throughput=("throughput", "mean"),
            ar_throughput=("ar_throughput", "mean"),
            tokens_per_iteration=("tokens_per_iteration", "mean"),
            acceptance_rate=("acceptance_rate", "mean"),
            repeats=("speedup", "size"),
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
    return best[
        [
            "method",
            "pair",
            "dataset",
            "temperature",
            "max_new_tokens",
            "speedup",
            "throughput",
            "ar_throughput",
            "tokens_per_iteration",
            "acceptance_rate",
            "params",
            "repeats",
            *(["predicted_speedup"] if predicted else []),
        ]
    ].reset_index(drop=True)


def compare_table(best: pd.DataFrame) -> pd.DataFrame:
    """The methods x pairs pivot of `compare` (cells: speedup), settings that vary as rows."""
    index = ["method"] + [
        c for c in ("dataset", "temperature", "max_new_tokens") if best[c].nunique() > 1
    ]
    cells = best.assign(cell=best.apply(_speedup_cell, axis=1))
    pivot = cells.pivot_table(
        index=index, columns="pair", values="cell", aggfunc="first", sort=False
    )
    pivot.columns.name = None
    return pivot.reset_index().fillna("-")


def _speedup_cell(row: pd.Series) -> str:
    """ "0.72x" measured; with a prediction "0.72x (predicted 0.70x)", or "predicted 1.9x"
    alone where nothing was measured on the predicted device."""
    measured = f"{row['speedup']:.2f}x" if pd.notna(row["speedup"]) else ""
    if "predicted_speedup" not in row or pd.isna(row["predicted_speedup"]):
        return measured or "-"
    pred = f"predicted {row['predicted_speedup']:.2f}x"
    return f"{measured} ({pred})" if measured else pred


def export_frame(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=["pair"], errors="ignore")


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


def check_output_dir(path: str | Path) -> None:
    """QueryError (one line) unless files can be written into folder `path`, made if needed."""
    p = Path(path)
    if p.exists():
        if not p.is_dir():
            raise QueryError(f"cannot write plots to {path}: it is not a folder")
        if not os.access(p, os.W_OK):
            raise QueryError(f"cannot write plots to {path}: folder {p} is not writable")
        return
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise QueryError(f"cannot write plots to {path}: {parent} is not a folder")
    if not os.access(parent, os.W_OK):
        raise QueryError(f"cannot write plots to {path}: folder {parent} is not writable")


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
