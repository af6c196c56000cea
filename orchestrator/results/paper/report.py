"""`orch report SWEEP -o DIR`: one sweep as a paper-style report, built only from the database.

DIR/report.md and DIR/report.html say the same (orchestrator/results/paper/doc.py), figures are PNG
files under DIR/img/ (orchestrator/results/paper/figures.py). What is in it follows from the data:
- header: the sweep, its file's leading comment (the paper, section and table it reproduces)
  and the scale it ran at when stored (sweeps.spec `source`, orchestrator/spec/scale.py
  provenance), pairs, datasets, sampling settings, trial counts, the devices the trials ran on;
- each method's best config, then every config (mean over repeats): speedup over the
  autoregressive trials with the same settings (orchestrator/results/frame.py add_speedup), tokens
  per iteration (block efficiency), every scalar acceptance definition under its name
  (engine/metrics.py acceptance_definitions, pooled over the config's prompts and repeats),
  tokens/s, the losslessness certificate (engine/certify.py trial_certificate) and the device;
- figures and per-verifier tables where the sweep varies what they are about (see
  report_figures.py), and the cost model's prediction on every profiled GPU (the
  `orch compare --predict-on` code path).
Deterministic: the same database content gives byte-identical Markdown and HTML on SQLite and
on Postgres (rows sorted on values, fixed number formats, no database URL, ids or clock times).
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import pandas as pd

from engine.certify import GREEDY_CHECK, trial_certificate
from engine.metrics import ACCEPTANCE_DEFINITIONS, acceptance_definitions
from orchestrator.results.frame import BASELINE, QueryError, load_frame, resolve_sweep
from orchestrator.results.paper.doc import Block, table, to_html, to_markdown
from orchestrator.results.profiles import TRIALS_OWN, PredictWith
from orchestrator.store import Store

# config fields that set where and how a trial measured (column name, short label)
SETTINGS = (
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
)
SETTING_COLS = [c for c, _ in SETTINGS]
LABELS = dict(SETTINGS)
# the scalar acceptance definitions (the histogram and the depth-wise rates are figures)
ACCEPTANCE = tuple(
    k
    for k in ACCEPTANCE_DEFINITIONS
    if k not in ("ddtree_acceptance_length_histogram", "delayed_acceptance_by_depth")
)


def write_report(
    store: Store, sweep: str | None, out_dir: str | Path, predict_with: PredictWith = TRIALS_OWN
) -> list[Path]:
    """Read sweep `sweep` (None: the most recent), then write report.md, report.html and the
    figures into `out_dir`; everything is computed before the first file is written.
    `predict_with`: what the predictions on profiled GPUs take instead of each trial's own
    engine, dtype and host time (orchestrator/results/profiles.py)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from orchestrator.results.paper.figures import figure_sections
    from orchestrator.results.paper.header import distribution_checks, failures, header, predictions

    name = resolve_sweep(store, sweep)
    info = store.sweep(name)
    df = load_frame(store, name, details=True)
    df = df.sort_values(["config_hash"], kind="stable").reset_index(drop=True)
    order = method_order(info["spec"] or {}, df)
    cf = configs(df, order)
    blocks = header(store, info, df)
    blocks += main_tables(cf)
    more, figs = figure_sections(cf)
    blocks += more + distribution_checks(store, name, df)
    blocks += predictions(store, df, cf, order, predict_with) + failures(store, info)
    out = Path(out_dir)
    written = []
    try:
        (out / "img").mkdir(parents=True, exist_ok=True)
        for file, fig in figs:
            fig.savefig(out / "img" / file, dpi=100, metadata={"Software": None})
            plt.close(fig)
            written.append(out / "img" / file)
        title = f"orch report: sweep {name}"
        for file, text in (
            ("report.md", to_markdown(blocks)),
            ("report.html", to_html(blocks, title)),
        ):
            (out / file).write_text(text, encoding="utf-8")
            written.append(out / file)
    except OSError as e:  # check_output_dir passed; the disk said no (full, gone, ...)
        raise QueryError(f"cannot write the report to {out_dir}: {e.strerror or e}") from None
    finally:
        plt.close("all")
    return written


# ----------------------------------------------------------------------------- configs


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
        key = json.dumps([plain(t[c]) for c in SETTING_COLS] + [t["method"], t["params"]])
        by_config.setdefault(key, []).append(t)
    rows = []
    for trials in by_config.values():
        first = trials[0]
        its = [it for t in trials for it in (t["per_iteration"] or [])]
        acc = acceptance_definitions(its)
        speedups = [plain(t["speedup"]) for t in trials]
        rows.append(
            {
                **{c: plain(first[c]) for c in SETTING_COLS},
                "method": first["method"],
                "params": {c[6:]: plain(first[c]) for c in params if plain(first[c]) is not None},
                "params_text": first["params"],
                "n": len(trials),
                "speedup": _mean(speedups),
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
    values = [plain(v) for v in values]
    return None if None in values else sum(values) / len(values)


def plain(v: Any) -> Any:
    """A frame value as plain Python: NaN -> None, numpy scalars -> Python, tuples -> lists."""
    if hasattr(v, "item") and not isinstance(v, (list, dict, str)):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return list(v) if isinstance(v, tuple) else v


def vkey(v: Any) -> tuple:
    """A sort key over mixed values: numbers by value, then text, then None."""
    v = plain(v)
    if v is None:
        return (2, 0.0, "")
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return (0, float(v), "")
    return (1, 0.0, json.dumps(v, sort_keys=True, default=str))


def val(v: Any) -> str:
    """A setting or parameter value as text."""
    v = plain(v)
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, list):
        return "[" + ",".join(val(x) for x in v) + "]"
    return str(v)


def setting_val(col: str, v: Any) -> str:
    """A setting as text; an unset draft setting is the target's."""
    if col in ("draft_temperature", "draft_top_p", "draft_dtype") and plain(v) is None:
        return "target's"
    return val(v)


def num(v: Any, digits: int = 3) -> str:
    v = plain(v)
    return "-" if v is None else f"{v:.{digits}f}"


def certificate_cell(trials: list[dict[str, Any]]) -> str:
    """A config's losslessness certificate over its trials: the greedy check (engine/certify.py)
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
        gpu = plain(t["gpu_id"])
        names.add((plain(t["device_name"]) or "unrecorded") + (f" (GPU {gpu})" if gpu else ""))
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


def params_cell(params: dict[str, Any], names: list[str]) -> str:
    return ", ".join(f"{k}={val(params.get(k))}" for k in names) or "-"


# ----------------------------------------------------------------------------- sections


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
        "pair, dataset slice, sampling, new tokens, device and dtype (mean over repeats; "
        "below 1 is slower than autoregressive decoding).",
        "tokens/iter: tokens per target forward, the block efficiency (Spec-Bench's tau).",
    ] + [f"{k}: {ACCEPTANCE_DEFINITIONS[k]}." for k in ACCEPTANCE]
    cols = ["method", "params", *[LABELS[c] for c in shown], "n", "speedup", "tokens/iter"]
    cols += [*ACCEPTANCE, "tokens/s", "certificate", "measured on"]

    def row(r) -> tuple[str, ...]:
        base = r["method"] == BASELINE
        acc = ["-" if base else num(r[k]) for k in ACCEPTANCE]
        return (
            r["method"],
            params_cell(r["params"], varied[r["method"]]),
            *[setting_val(c, r[c]) for c in shown],
            str(r["n"]),
            num(r["speedup"]),
            num(r["tokens_per_iteration"]),
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
        ]
    else:
        out.append(
            (
                "p",
                "No trial has an autoregressive baseline with the same settings: "
                "speedups are not defined (add `- name: autoregressive`).",
            )
        )
    out += [
        ("h2", "All configs"),
        *[("p", n) for n in notes],
        table(cols, [row(r) for _, r in cf.iterrows()]),
    ]
    return out
