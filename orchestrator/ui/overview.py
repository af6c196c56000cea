"""The sweeps page's data (`/api/sweeps`): every sweep with its status, trial counts, eta,
best speedup per pair, description and sweep file, code versions, drivers, and which host
and GPU runs what right now."""

from __future__ import annotations

from typing import Any

import pandas as pd

from db.models import SweepStatus, Trial, TrialStatus
from orchestrator.records import TrialConfig
from orchestrator.results import QueryError, load_frame
from orchestrator.results.settings import BASELINE, CONFIG_KEY
from orchestrator.results.values import cell_value
from orchestrator.run.eta import eta_s, format_eta
from orchestrator.ui.reader import Reader


def sweeps(reader: Reader) -> dict[str, Any]:
    """The JSON of `/api/sweeps`: {"database": redacted URL, "sweeps": [...]}, newest first."""
    sigs = reader.signatures()
    counts = {r["sweep"]: r for r in reader.store.counts()}
    out = []
    for row in reader.sweep_rows():
        name = row["name"]
        sig = sigs.get(name, ())
        one = reader.cached(name, "overview", lambda: _one(reader, row, counts, sig), sig)
        # annotations change no signature: read with every answer
        out.append({**one, "tags": row.get("tags") or [], "note": row.get("note") or ""})
    return {"database": reader.display_url, "version": _version(sigs), "sweeps": out}


def _version(sigs: dict[str, tuple]) -> str:
    """A short token that changes whenever any sweep's signature does (the page polls it)."""
    return format(hash(tuple(sorted(sigs.items()))) & 0xFFFFFFFF, "08x")


def _one(reader: Reader, row: dict, counts: dict, sig: tuple) -> dict[str, Any]:
    name = row["name"]
    c = counts.get(name, {})
    status = str(c.get("status", row["status"]))
    left = c.get(TrialStatus.PENDING.value, 0) + c.get(TrialStatus.RUNNING.value, 0)
    eta = (
        eta_s(reader.store.finish_times(name), left)
        if status == SweepStatus.RUNNING.value
        else None
    )
    placed = reader.trial_rows(
        name,
        [
            Trial.status,
            Trial.worker_host,
            Trial.gpu_id,
            Trial.code_version,
            Trial.owner,
            Trial.config,
            Trial.device_name,
        ],
        Trial.status.in_((TrialStatus.RUNNING, TrialStatus.DONE, TrialStatus.FAILED)),
    )
    running = [
        {
            "host": p["worker_host"] or "",
            "gpu": p["gpu_id"] or "",
            "device": p["device_name"] or "",
            "trial": TrialConfig.from_dict(p["config"]).label(),
        }
        for p in placed
        if p["status"] == TrialStatus.RUNNING
    ]
    spec = row.get("spec") or {}
    source = spec.get("source") or {}
    versions = {p["code_version"] for p in placed if p["code_version"]}
    drivers = {p["owner"] for p in placed if p["owner"] and p["status"] == TrialStatus.RUNNING}
    if c.get("driver"):
        drivers.add(c["driver"])
    return {
        "name": name,
        "status": status,
        "trials": c.get("trials", 0),
        **{s.value: c.get(s.value, 0) for s in TrialStatus},
        "eta_s": None if eta is None else round(eta, 1),
        "eta": format_eta(eta),
        "description": row.get("description") or "",
        "file": source.get("file") or "",
        "paper": (source.get("comment") or "").strip(),
        "code_versions": sorted(versions | ({row["code_version"]} - {""})),
        "drivers": sorted(drivers),
        "running_trials": running,
        "hosts": sorted({f"{p['worker_host'] or '?'} {p['gpu_id'] or ''}".strip() for p in placed}),
        "best": best_per_pair(_light_frame(reader, name, sig)),
        "updated": str(row.get("updated_at") or "")[:19],
    }


def _light_frame(reader: Reader, name: str, sig: tuple) -> pd.DataFrame | None:
    """The sweep's results frame without per-prompt data: no intervals, quick to load."""

    def build():
        try:
            return load_frame(reader.store, name)
        except QueryError:
            return None

    return reader.cached(name, "light frame", build, sig, hold=False)


def best_per_pair(df: pd.DataFrame | None) -> list[dict[str, Any]]:
    """Per pair, the config with the largest mean speedup over its repeats (method, params,
    speedup and its interval where the frame has one), the autoregressive baseline left out
    where a pair has any other method."""
    if df is None or df["speedup"].notna().sum() == 0:
        return []
    have = df[df["speedup"].notna()]
    drafted = have[have["method"] != BASELINE]
    have = pd.concat([drafted, have[~have["pair"].isin(set(drafted["pair"]))]])
    cols = [c for c in ("speedup_lo", "speedup_hi") if c in have.columns]
    g = have.groupby(list(CONFIG_KEY), dropna=False, sort=False)
    per = g.agg(speedup=("speedup", "mean"), **{c: (c, "first") for c in cols}).reset_index()
    per["pair"] = per["target"] + "/" + per["draft"]
    best = per.loc[per.groupby("pair", sort=False)["speedup"].idxmax()]
    return [
        {
            "pair": r["pair"],
            "method": r["method"],
            "params": r["params"],
            "speedup": cell_value(r["speedup"]),
            **{c: cell_value(r[c]) for c in cols},
        }
        for _, r in best.iterrows()
    ]
