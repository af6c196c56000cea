"""Sweep orchestration over the engine; `load` reads results into pandas for notebooks.

    from orchestrator import load
    df = load("sqlite:///orch.db")               # the most recent sweep, one row per trial
    df = load("postgresql://...", sweep="grid")  # a named sweep; all_sweeps=True: every trial

Imports stay lazy: `orch` and the workers import this package without pandas or SQLAlchemy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["load"]


def load(
    db_url: str | None = None,
    sweep: str | None = None,
    *,
    all_sweeps: bool = False,
    details: bool = False,
) -> "pd.DataFrame":
    """The finished trials of `sweep` (default: the most recently updated sweep; every sweep
    with `all_sweeps`) as a DataFrame with the columns of `orch export`: resolved config,
    method parameters as `params.<name>`, placement, every metric, `speedup` over the
    autoregressive trials with the same settings; `details`: per-prompt and per-iteration
    lists too. `db_url` as `--db` takes it (None: $ORCH_DB_URL, else sqlite:///orch.db).
    Raises orchestrator.store.StoreError (unknown sweep, unreachable database) or
    orchestrator.results.QueryError (no finished trials)."""
    from orchestrator.results import export_frame, load_frame  # lazy: pandas
    from orchestrator.store import Store  # lazy: SQLAlchemy

    store = Store(db_url, mode="read")
    try:
        df = load_frame(
            store,
            sweep,
            details=details,
            all_sweeps=all_sweeps,
            per_prompt=True,
            certificates=details,
        )
        return export_frame(df, details)
    finally:
        store.close()
