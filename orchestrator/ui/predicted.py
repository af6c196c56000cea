"""The sweep page's predicted-against-measured figure (`/api/sweep/NAME/predicted`, fetched
on request: it reads every trial's per-iteration data): per profiled device (`orch profile`),
each config's speedup as the cost model predicts it there (orchestrator/results/profiles.py
add_predictions, as `orch compare --predict-on DEVICE`) against its measured speedup, both
means over repeats."""

from __future__ import annotations

from typing import Any

from orchestrator.results import add_predictions, device_curves, load_frame
from orchestrator.results.profiles import load_profiles
from orchestrator.results.settings import CONFIG_KEY
from orchestrator.results.values import cell_value
from orchestrator.ui.reader import Reader, version_of


def predicted(reader: Reader, name: str) -> dict[str, Any]:
    sig = reader.signature(name)
    return reader.cached(name, "predicted", lambda: _build(reader, name, sig), sig)


def _build(reader: Reader, name: str, sig: tuple) -> dict[str, Any]:
    devices = sorted({p["device_name"] for p in load_profiles(reader.store)})
    out: dict[str, Any] = {"version": version_of(sig), "devices": devices, "points": []}
    if not devices:
        out["note"] = "no profiled device in this database (orch profile measures one)"
        return out
    df = load_frame(reader.store, name, details=True, certificates=False)
    for device in devices:
        p = add_predictions(df, device_curves(reader.store, device), device)
        p = p[p["predicted_speedup"].notna() & p["speedup"].notna()]
        if p.empty:
            continue
        g = p.groupby(list(CONFIG_KEY), dropna=False, sort=False)
        per = g.agg(speedup=("speedup", "mean"), predicted=("predicted_speedup", "mean"))
        for r in per.reset_index().to_dict("records"):
            out["points"].append({
                "device": device,
                "label": f"{r['method']} {r['params']} ({r['target']}/{r['draft']})",
                "measured": cell_value(r["speedup"]),
                "predicted": cell_value(r["predicted"]),
                "machine": r["machine"],
            })  # fmt: skip
    if not out["points"]:
        out["note"] = "the profiled devices have no curves for this sweep's models"
    return out
