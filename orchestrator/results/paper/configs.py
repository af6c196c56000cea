"""`orch report`'s configs: one row per config of the sweep (its repeats pooled) with its
cells, sorted on values, and the tables of them (each method's fixed parameters, its best
config per setting, every config)."""

from __future__ import annotations

import json
import math
import statistics
from typing import Any

import pandas as pd

from engine.certify.teacher_forced import GREEDY_CHECK, trial_certificate
from engine.metrics import ACCEPTANCE_DEFINITIONS, acceptance_definitions
from orchestrator.results.intervals import COLUMNS as INTERVALS
from orchestrator.results.intervals import overlaps
from orchestrator.results.paper.cells import num, params_cell, setting_val, val, vkey
from orchestrator.results.paper.doc import Block, table
from orchestrator.results.settings import BASELINE
from orchestrator.results.values import json_value

# the config fields that set where and how a trial measured (column name, short label), in the
# report's order: the baseline's SETTINGS (results/settings.py; target and draft as their
# `pair`) and the draft's own DRAFT_SETTINGS, by which configs of one method differ too
SETTING_LABELS = (
    ("pair", "pair"),
    ("dataset", "dataset"),
    ("category", "category"),
    ("prompts", "prompts"),
    ("prompt_tokens", "prompt tokens"),
    ("chat", "chat"),
    ("temperature", "T"),
    ("top_p", "top-p"),
    ("draft_temperature", "draft T"),
    ("draft_top_p", "draft top-p"),
    ("max_new_tokens", "new tokens"),
    ("device", "device"),
    ("dtype", "dtype"),
    ("draft_dtype", "draft dtype"),
    ("engine", "engine"),
    ("target_revision", "target revision"),
    ("draft_revision", "draft revision"),
    ("placement", "placement"),
    ("machine", "machine"),
)
SETTING_COLS = [c for c, _ in SETTING_LABELS]
LABELS = dict(SETTING_LABELS)
# the scalar acceptance definitions (the histogram and the depth-wise rates are figures)
ACCEPTANCE = tuple(
    k
    for k in ACCEPTANCE_DEFINITIONS
    if k not in ("ddtree_acceptance_length_histogram", "delayed_acceptance_by_depth")
)


def method_order(spec: dict[str, Any], df: pd.DataFrame) -> dict[str, int]:
    """Methods in the sweep file's order, the baseline first, others after by name."""
    names = [BASELINE] + [m.get("name") for m in spec.get("methods", [])]
    names += sorted(set(df["method"]) - set(names))
    return {m: i for i, m in enumerate(dict.fromkeys(names))}


def configs(df: pd.DataFrame, order: dict[str, int]) -> pd.DataFrame:
    """One row per config (its trials' repeats pooled), sorted on values: method order, then
    settings, then parameters. Columns: the settings, method, `params` (a dict), n, the mean
    metrics, every acceptance definition (pooled), `hist`, `by_depth`, certificate, devices."""
    params = sorted(c for c in df.columns if c.startswith("param."))
    by_config: dict[str, list[dict[str, Any]]] = {}
    for t in df.to_dict("records"):  # plain Python: a grid of thousands of configs stays fast
        key = json.dumps([json_value(t[c]) for c in SETTING_COLS] + [t["method"], t["params"]])
        by_config.setdefault(key, []).append(t)
    rows = []
    for trials in by_config.values():
        first = trials[0]
        its = [it for t in trials for it in (t["per_iteration"] or [])]
        acc = acceptance_definitions(its)
        speedups = [json_value(t["speedup"]) for t in trials]
        rows.append(
            {
                **{c: json_value(first[c]) for c in SETTING_COLS},
                "method": first["method"],
                "params": {
                    c[6:]: json_value(first[c]) for c in params if json_value(first[c]) is not None
                },
                "params_text": first["params"],
                "n": len(trials),
                "speedup": _mean(speedups),
                **{c: json_value(first.get(c)) for c in INTERVALS},
                "speedup_note": first.get("speedup_note") or "",
                "speedup_std": statistics.stdev(speedups)
                if len(trials) > 1 and None not in speedups
                else None,
                "tokens_per_iteration": _mean([t["tokens_per_iteration"] for t in trials]),
                "throughput": _mean([t["throughput"] for t in trials]),
                **{k: acc[k] for k in ACCEPTANCE},
                "hist": acc["ddtree_acceptance_length_histogram"],
                "by_depth": acc["delayed_acceptance_by_depth"],
                "certificate": certificate_cell(trials),
                "device_name": devices_cell(trials),
            }
        )
    rows.sort(
        key=lambda r: (
            order.get(r["method"], len(order)),
            tuple(vkey(r[c]) for c in SETTING_COLS),
            tuple((k, vkey(v)) for k, v in sorted(r["params"].items())),
        )
    )
    return pd.DataFrame(rows)


def _mean(values: list) -> float | None:
    """The mean in list order (None when a value is missing: no baseline)."""
    values = [json_value(v) for v in values]
    return None if None in values else sum(values) / len(values)


def certificate_cell(trials: list[dict[str, Any]]) -> str:
    """A config's losslessness certificate over its trials: the greedy check
    (engine/certify/teacher_forced.py)
    and the comparison with the autoregressive trial, or the sampling verifier's claim and its
    stored distribution check (orchestrator/results/certificates.py)."""
    certs = [trial_certificate(t["per_prompt"] or []) for t in trials]
    words = {t.get("lossless") for t in trials}
    if not certs or any(c is None for c in certs):
        return "not certified"
    if certs[0]["check"] == GREEDY_CHECK:
        prompts = sum(c["prompts"] for c in certs)
        failed = [c for c in certs if not c["lossless"]]
        if not failed:
            same = trials[0].get("ar_equal", "-")
            versus = "" if same == "-" or trials[0]["method"] == BASELINE else f"; = AR {same}"
            return f"lossless: greedy check, {prompts}/{prompts} prompts{versus}"
        c = failed[0]
        bad = sum(x["failed_prompts"] for x in failed)
        return (
            f"MISMATCH: {bad}/{prompts} prompts (first: prompt {c['first_failed_prompt']}, "
            f"position {c['first_mismatch']}, logit margin {c['max_margin']:.3g})"
        )
    c = certs[0]
    on = (
        f"{c['verifier']} on {c['tree_sampling']} trees"
        if c.get("tree_sampling")
        else c["verifier"]
    )
    if words == {"exact"}:
        return "exact: sampled from the target"
    if not c.get("verifier_declares_lossless"):
        return f"NOT lossless: {on}"
    if "failed" in words:
        return f"FAILED: {on}, distribution check (orch certify)"
    if words == {"tested"}:
        return f"tested: {on}, distribution check passed"
    tested = "distribution-tested" if c.get("verifier_distribution_tested") else "untested"
    return f"claimed: {on}, {tested}"


def devices_cell(trials: list[dict[str, Any]]) -> str:
    names = set()
    for t in trials:
        gpu = json_value(t["gpu_id"])
        names.add((json_value(t["device_name"]) or "unrecorded") + (f" (GPU {gpu})" if gpu else ""))
    return "; ".join(sorted(names))


def varying(cf: pd.DataFrame) -> list[str]:
    """The settings that take more than one value in the sweep."""
    return [c for c in SETTING_COLS if cf[c].map(val).nunique() > 1]


def varied_params(cf: pd.DataFrame, method: str) -> list[str]:
    """The parameters of `method` that take more than one value among its configs."""
    rows = cf[cf["method"] == method]["params"]
    names = sorted({k for p in rows for k in p})
    return [k for k in names if rows.map(lambda p: val(p.get(k))).nunique() > 1]


def varied_by_method(cf: pd.DataFrame) -> dict[str, list[str]]:
    """varied_params of every method of `cf`."""
    return {m: varied_params(cf, m) for m in dict.fromkeys(cf["method"])}


# ----------------------------------------------------------------------------- tables


def main_tables(cf: pd.DataFrame) -> list[Block]:
    vary = varying(cf)
    shown = [c for c in vary if c != "device"] + (["device"] if "device" in vary else [])
    varied = varied_by_method(cf)
    fixed = []
    for m, names in varied.items():
        p = cf[cf["method"] == m]["params"].iloc[0]
        fixed.append((m, params_cell(p, [k for k in sorted(p) if k not in names])))
    out: list[Block] = [
        ("h2", "Methods"),
        (
            "p",
            "Each method's parameters that are the same in all its configs; the tables "
            "below show the ones that vary.",
        ),
        table(("method", "fixed parameters"), fixed),
    ]
    notes = [
        "speedup: tokens/s over the mean tokens/s of the autoregressive trials with the same "
        "pair, dataset slice, sampling, new tokens, device, dtype and engine on the same "
        "machine (mean over repeats; below 1 is slower than autoregressive decoding; never a "
        "ratio across machines).",
        "95% CI: the paired bootstrap interval over prompts and repeats "
        "(orchestrator/results/intervals.py), of the speedup and of tokens/iter.",
        "tokens/iter: tokens per target forward, the block efficiency (Spec-Bench's tau).",
    ] + [f"{k}: {ACCEPTANCE_DEFINITIONS[k]}." for k in ACCEPTANCE]
    cols = ["method", "params", *[LABELS[c] for c in shown], "n", "speedup", "speedup 95% CI"]
    cols += ["tokens/iter", "tokens/iter 95% CI", *ACCEPTANCE, "tokens/s", "certificate"]
    cols += ["measured on"]

    def row(r) -> tuple[str, ...]:
        base = r["method"] == BASELINE
        acc = ["-" if base else num(r[k]) for k in ACCEPTANCE]
        return (
            r["method"],
            params_cell(r["params"], varied[r["method"]]),
            *[setting_val(c, r[c]) for c in shown],
            str(r["n"]),
            num(r["speedup"]),
            interval_cell(r["speedup_lo"], r["speedup_hi"]),
            num(r["tokens_per_iteration"]),
            interval_cell(r["tau_lo"], r["tau_hi"]),
            *acc,
            num(r["throughput"], 2),
            r["certificate"],
            r["device_name"],
        )

    best = cf[cf["speedup"].notna()]
    if not best.empty:
        skey = best[shown].apply(lambda r: json.dumps([val(v) for v in r]), axis=1)
        pick = best.assign(_k=skey).groupby(["_k", "method"], sort=False)["speedup"].idxmax()
        best = cf.loc[sorted(pick.values)]
        out += [
            ("h2", "Best config per method"),
            ("p", "Each method's config with the highest mean speedup, per setting."),
            table(cols, [row(r) for _, r in best.iterrows()]),
            *missing_baselines(cf),
            *side_by_side(best),
        ]
    else:
        out.append(
            (
                "p",
                "No trial has an autoregressive baseline with the same settings on its machine: "
                "speedups are not defined (add `- name: autoregressive`; never across machines).",
            )
        )
        out += missing_baselines(cf)
    out += [
        ("h2", "All configs"),
        *[("p", n) for n in notes],
        table(cols, [row(r) for _, r in cf.iterrows()]),
    ]
    return out


def interval_cell(lo: Any, hi: Any) -> str:
    lo, hi = json_value(lo), json_value(hi)
    return "-" if lo is None or hi is None else f"{lo:.3f}-{hi:.3f}"


def missing_baselines(cf: pd.DataFrame) -> list[Block]:
    """A paragraph naming, per reason, how many configs have no speedup (no autoregressive trial
    with their settings, or none on their machine)."""
    notes = cf.loc[cf["speedup"].isna(), "speedup_note"]
    counts = notes[notes != ""].value_counts()
    if counts.empty:
        return []
    parts = [f"{reason}: {n} config{'s' if n > 1 else ''}" for reason, n in sorted(counts.items())]
    return [("p", "No speedup (never a ratio across machines) where there is " + "; ".join(parts))]


def side_by_side(best: pd.DataFrame) -> list[Block]:
    """Each setting measured on several machines: per method its best config's speedup with
    its interval and its rank on each machine (=1: its interval overlaps the fastest's)."""
    others = [c for c in SETTING_COLS if c not in ("machine", "device", "dtype")]
    out: list[Block] = []
    keys = best[others].apply(lambda r: json.dumps([val(v) for v in r]), axis=1)
    for _, g in best.groupby(keys, sort=False):
        machines = sorted(set(g["machine"]), key=vkey)
        if len(machines) < 2:
            continue
        cells: dict[str, dict[str, str]] = {}
        for m in machines:
            on = g[g["machine"] == m].sort_values("speedup", ascending=False, kind="stable")
            first = on.iloc[0]
            for rank, (_, r) in enumerate(on.iterrows(), start=1):
                ends = (r["speedup_lo"], r["speedup_hi"], first["speedup_lo"], first["speedup_hi"])
                tied = rank > 1 and overlaps(*(math.nan if x is None else x for x in ends))
                cells.setdefault(r["method"], {})[m] = (
                    f"{num(r['speedup'])} ({interval_cell(r['speedup_lo'], r['speedup_hi'])})"
                    f" #{'=1' if tied else rank}"
                )
        set_ = [c for c in others if json_value(g.iloc[0][c]) is not None]
        label = ", ".join(f"{LABELS[c]} {setting_val(c, g.iloc[0][c])}" for c in set_)
        out += [
            ("h3", f"Machines side by side ({label})"),
            table(
                ["method", *machines],
                [(m, *[c.get(x, "-") for x in machines]) for m, c in cells.items()],
            ),
        ]
    return out
