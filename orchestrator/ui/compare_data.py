"""Two sweeps compared (`/api/compare?a=A&b=B`): per config present in either, its mean
speedup in each (orch query's rows: mean over repeats, the speedup's 95% bootstrap
interval), their ratio B/A, and whether B's interval moved clear of A's.

Configs are matched on everything but where and how they ran (device, dtype, engine,
machine): a config that ran twice on one machine with one engine is one trial shared by both
sweeps, so what two sweeps can differ in is exactly that (another GPU, engine path, dtype).
Each side's speedup is over its own machine's autoregressive baseline."""

from __future__ import annotations

from typing import Any

import pandas as pd

from orchestrator.results import QueryError, apply_where, query
from orchestrator.results.output import to_records
from orchestrator.results.settings import CONFIG_KEY
from orchestrator.ui.reader import Reader

PLACEMENT = ("device", "dtype", "engine", "machine")
MATCH = [c for c in CONFIG_KEY if c not in PLACEMENT]
SHOWN = [
    "machine",
    "engine",
    "dtype",
    "speedup",
    "speedup_lo",
    "speedup_hi",
    "tokens_per_iteration",
    "throughput",
]


def compare_sweeps(reader: Reader, a: str, b: str, where: tuple[str, ...]) -> dict[str, Any]:
    frames = []
    for name in (a, b):
        reader.store.sweep(name)  # an unknown sweep: StoreError (404)
        df = reader.frame(name)
        if df is None:
            raise QueryError(f"sweep {name!r} has no finished trials yet")
        df = apply_where(df, where)
        if df.empty:
            raise QueryError(f"no finished trials of sweep {name!r} match the filters")
        frames.append(query(df, "speedup", (), None)[[*MATCH, "pair", *SHOWN]])
    m = frames[0].merge(
        frames[1].drop(columns="pair"), on=MATCH, how="outer", suffixes=("_a", "_b")
    )
    m["pair"] = m["pair"].fillna(m["target"] + "/" + m["draft"])
    m["ratio"] = m["speedup_b"] / m["speedup_a"]
    m["moved"] = [_moved(r) for _, r in m.iterrows()]
    m = m.sort_values(["pair", "method", "params"], kind="stable")
    cols = [
        "pair",
        "method",
        "params",
        "max_new_tokens",
        "temperature",
        *[f"{c}_{s}" for c in SHOWN for s in "ab"],
        "ratio",
        "moved",
    ]
    return {"a": a, "b": b, "where": list(where), "rows": to_records(m[cols])}


def _moved(r: pd.Series) -> str:
    """ "up" / "down" when B's interval lies wholly above / below A's, "" when they overlap,
    "only in A" / "only in B" for a config one sweep lacks, "-" without intervals."""
    if pd.isna(r["speedup_a"]) and pd.isna(r["speedup_b"]):
        return (
            "only in A"
            if pd.notna(r["throughput_a"]) and pd.isna(r["throughput_b"])
            else (
                "only in B" if pd.notna(r["throughput_b"]) and pd.isna(r["throughput_a"]) else "-"
            )
        )
    if pd.isna(r["throughput_b"]):
        return "only in A"
    if pd.isna(r["throughput_a"]):
        return "only in B"
    lo_a, hi_a, lo_b, hi_b = (
        r[f"speedup_{s}_{x}"] for s, x in (("lo", "a"), ("hi", "a"), ("lo", "b"), ("hi", "b"))
    )
    if any(pd.isna(v) for v in (lo_a, hi_a, lo_b, hi_b)):
        return "-"
    if lo_b > hi_a:
        return "up"
    if hi_b < lo_a:
        return "down"
    return ""
