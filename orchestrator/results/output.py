"""Results frames written out (frame.py): `orch export` (csv, json,
parquet), the table / json / csv that query, compare and status print, and the checks that an
output file or folder can be written before anything runs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from orchestrator.results.frame import QueryError
from orchestrator.results.values import cell_value


def export_frame(df: pd.DataFrame, details: bool = True) -> pd.DataFrame:
    """The rows `orch export` and `orchestrator.load` give: one per finished trial, method
    parameters as `params.<name>` (MLflow's naming; `params` holds them all as `k=v,...`);
    without `details`, no per-prompt or per-iteration lists (a frame loaded with per_prompt
    for its intervals)."""
    drop = ["pair"] if details else ["pair", "per_prompt", "per_iteration"]
    out = df.drop(columns=drop, errors="ignore")
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
        out.append({k: cell_value(v) for k, v in rec.items()})
    return out


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
    v = cell_value(v)
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e6 else f"{v:.4e}"
    return str(v)
