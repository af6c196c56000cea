"""The sweep page's figures as data for its SVG charts (static/charts.js): speedup against
each grid axis, parallel coordinates over the varied parameters, heatmaps over two grid axes
(DynaTree's depth x branch), acceptance by depth, the acceptance-length histogram (DDTree's),
tau against speedup, and the time split per iteration. Configs are `orch query`'s rows (mean
over repeats, with the speedup's interval); per-prompt statistics are pooled per config."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pandas as pd

from orchestrator.results import varied_params
from orchestrator.results.settings import CONFIG_KEY, settings_keys
from orchestrator.results.values import cell_value

SPLIT = ("draft_s", "target_s", "verify_s", "bookkeeping_s")
SHOWN_CONFIGS = 12  # configs in the per-config figures: the fastest ones


def figures(df: pd.DataFrame, configs: pd.DataFrame) -> dict[str, Any]:
    """Every figure's data for trials `df` and their configs (query rows by speedup)."""
    varied = varied_params(df)
    configs = configs.assign(label=configs["method"] + " " + configs["params"])
    points = [_point(r) for r in configs.to_dict("records")]
    top = configs[configs["speedup"].notna()].head(SHOWN_CONFIGS)
    if top.empty:
        top = configs.head(SHOWN_CONFIGS)
    return {
        "axes": _axes(configs, varied),
        "parallel": _parallel(configs, varied),
        "heatmaps": _heatmaps(configs, varied),
        "tau_speedup": points,
        "split": [
            {
                "label": r["label"],
                "pair": r["pair"],
                **{s: _per_iteration_ms(r, s) for s in SPLIT},
            }
            for r in top.to_dict("records")
        ],
        **_prompt_stats(df, top),
    }


def _point(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "label": r["label"],
        "method": r["method"],
        "pair": r["pair"],
        "speedup": cell_value(r["speedup"]),
        "lo": cell_value(r.get("speedup_lo")),
        "hi": cell_value(r.get("speedup_hi")),
        "tau": cell_value(r["tokens_per_iteration"]),
        "throughput": cell_value(r["throughput"]),
    }


def _per_iteration_ms(r: dict[str, Any], col: str) -> float | None:
    its = cell_value(r["iterations"])
    v = cell_value(r[col])
    return None if not its or v is None else 1000 * v / its


def _y(configs: pd.DataFrame) -> str:
    return "speedup" if configs["speedup"].notna().any() else "throughput"


def _axes(configs: pd.DataFrame, varied: dict[str, list[str]]) -> list[dict[str, Any]]:
    """Per method and varied parameter: per pair and value of the parameter, the config with
    the best mean speedup over the other parameters (value, speedup, its interval)."""
    y = _y(configs)
    out = []
    for method, params in varied.items():
        rows = configs[configs["method"] == method]
        for p in params:
            col = f"param.{p}"
            have = rows[rows[col].notna() & rows[y].notna()]
            best = have.loc[have.groupby(["pair", col], sort=False)[y].idxmax()]
            pts = [
                {
                    "x": cell_value(r[col]),
                    "y": cell_value(r[y]),
                    "lo": cell_value(r.get("speedup_lo")) if y == "speedup" else None,
                    "hi": cell_value(r.get("speedup_hi")) if y == "speedup" else None,
                    "label": r["label"],
                    "series": r["pair"],
                }
                for r in best.to_dict("records")
            ]
            out.append({"method": method, "param": p, "y": y, "points": pts})
    return out


def _parallel(configs: pd.DataFrame, varied: dict[str, list[str]]) -> list[dict[str, Any]]:
    """Per method with two or more varied parameters: those parameters and the speedup."""
    y = _y(configs)
    out = []
    for method, params in varied.items():
        if len(params) < 2:
            continue
        rows = configs[configs["method"] == method]
        dims = [*params, y]
        lines = [
            {
                "label": r["label"],
                "values": [cell_value(r[f"param.{p}"]) for p in params] + [cell_value(r[y])],
            }
            for r in rows.to_dict("records")
        ]
        out.append({"method": method, "dims": dims, "lines": lines})
    return out


def _heatmap_axes(method: str, params: list[str]) -> tuple[str, str]:
    """The two parameters a method's heatmap spans: the depth and branch axes of a method whose
    record draws its paper's depth x branch figure (DynaTree's, under its sweep's names, e.g.
    depth and branch), else its first two varied parameters."""
    from engine.drafters import DRAFTERS  # lazy: torch

    record = DRAFTERS.get(method)
    if record is not None and "depth_branch" in record.figures:
        aliases = getattr(record.config, "SWEEP_ALIASES", {}).items()  # (sweep name, paper's)
        pick = [next((n for n in names if n in params), None) for names in aliases][:2]
        if len(pick) == 2 and None not in pick:
            return pick[0], pick[1]
    return params[0], params[1]


def _heatmaps(configs: pd.DataFrame, varied: dict[str, list[str]]) -> list[dict[str, Any]]:
    """Per method and pair over its first two varied parameters (depth x branch for DynaTree,
    as its paper's figure): the best mean speedup in each cell, over the other parameters."""
    y = _y(configs)
    out = []
    for method, params in varied.items():
        if len(params) < 2:
            continue
        a, b = _heatmap_axes(method, params)
        for pair, rows in configs[configs["method"] == method].groupby("pair", sort=False):
            cells = rows.groupby([f"param.{a}", f"param.{b}"])[y].max().reset_index()
            out.append(
                {
                    "method": method,
                    "pair": pair,
                    "x": a,
                    "y": b,
                    "value": y,
                    "cells": [
                        [cell_value(r.iloc[0]), cell_value(r.iloc[1]), cell_value(r.iloc[2])]
                        for _, r in cells.iterrows()
                    ],
                }
            )
    return out


def _prompt_stats(df: pd.DataFrame, top: pd.DataFrame) -> dict[str, Any]:
    """Acceptance by depth (accepted over reached, pooled over prompts and repeats) and the
    acceptance-length histogram (DDTree's: accepted tokens per iteration, bonus included)
    of the shown configs, from the per-prompt statistics."""
    if "per_prompt" not in df.columns:
        return {"depth": [], "histogram": []}
    keys = settings_keys(df, CONFIG_KEY)
    wanted = dict(zip(settings_keys(top, CONFIG_KEY), top["label"] + " · " + top["pair"]))
    depth: dict[str, list[list[float]]] = defaultdict(list)
    hist: dict[str, list[int]] = defaultdict(list)
    for key, prompts in zip(keys, df["per_prompt"]):
        label = wanted.get(key)
        if label is None:
            continue
        for p in prompts or []:
            acc = p.get("acceptance") or {}
            by_depth = acc.get("delayed_acceptance_by_depth") or []
            for d, (accepted, reached, *_) in enumerate(by_depth):
                _add(depth[label], d, [accepted, reached])
            for n, count in enumerate(acc.get("ddtree_acceptance_length_histogram") or []):
                _add(hist[label], n, count)
    return {
        "depth": [
            {"label": k, "rates": [a / r if r else None for a, r in v]} for k, v in depth.items()
        ],
        "histogram": [{"label": k, "counts": v} for k, v in hist.items() if sum(v)],
    }


def _add(into: list, i: int, value) -> None:
    """into[i] += value, growing `into` as needed (value: a number or a [a, b] pair)."""
    zero = [0, 0] if isinstance(value, list) else 0
    while len(into) <= i:
        into.append(list(zero) if isinstance(zero, list) else zero)
    if isinstance(value, list):
        into[i] = [into[i][0] + value[0], into[i][1] + value[1]]
    else:
        into[i] += value
