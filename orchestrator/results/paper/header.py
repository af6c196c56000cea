"""The parts of `orch report` that read more of the database than the results frame: the
header (the sweep's stored spec and file provenance, trial counts by status, devices), the
distribution checks of its sampled trials (`orch certify`), the cost model's predictions on
profiled GPUs (the `orch compare --predict-on` code path, results/profiles.py) and the failed
trials."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pandas as pd

from db.models import TrialStatus
from orchestrator.results.certificates import key, load_checks, row_setting
from orchestrator.results.frame import QueryError, progress_line
from orchestrator.results.paper.cells import num, params_cell, val, vkey
from orchestrator.results.paper.configs import varied_by_method
from orchestrator.results.paper.doc import Block, table
from orchestrator.results.profiles import (
    TRIALS_OWN,
    PredictWith,
    add_predictions,
    compare_predicted,
    device_curves,
    is_gpu_name,
    load_profiles,
)
from orchestrator.results.values import json_value
from orchestrator.store import Store


def header(store: Store, info: dict[str, Any], df: pd.DataFrame) -> list[Block]:
    spec, name = info["spec"] or {}, info["name"]
    source = spec.get("source") or {}
    out: list[Block] = [("h1", f"Sweep {name}")]
    if info.get("description"):
        out.append(("p", info["description"]))
    if source.get("comment"):
        out += [("p", f"From the sweep file {source.get('file')}:"), ("pre", source["comment"])]
    out.append(("p", "Scale: " + scale_line(name, source)))
    counts = (store.counts(name) or [{}])[0]
    out.append(("p", progress_line(name, counts)))
    rows = [
        ("pairs", "; ".join(sorted(set(df["pair"])))),
        ("datasets", "; ".join(sorted({dataset_text(r) for _, r in df.iterrows()}))),
        ("sampling (T, top-p, draft T, draft top-p)", "; ".join(sampling_points(df))),
        ("new tokens", ", ".join(str(v) for v in sorted(set(df["max_new_tokens"])))),
        ("repeats", str(spec.get("repeats", "-"))),
        ("sweep status", str(info["status"])),
        ("code versions", ", ".join(sorted({str(v) for v in df["code_version"]}))),
    ]
    out += [("h2", "Setup"), table(("", "value"), rows)]
    statuses = [s.value for s in TrialStatus]
    out += [
        ("h2", "Trials"),
        table(
            ("trials", *statuses),
            [(str(counts.get("trials", 0)), *(str(counts.get(s, 0)) for s in statuses))],
        ),
        ("p", "Every number below is over the finished (done) trials only."),
    ]
    dev = pd.DataFrame(
        {
            "name": df["device_name"].map(lambda v: json_value(v) or "unrecorded"),
            "device": df["device"].map(val),
            "gpu": df["gpu_id"].map(lambda v: "-" if json_value(v) is None else str(v)),
            "host": df["worker_host"].map(lambda v: json_value(v) or "-"),
        }
    )
    per = dev.groupby(["name", "device", "gpu", "host"]).size().reset_index(name="n")
    out += [
        ("h2", "Devices"),
        ("p", "Where the finished trials ran (trials.device_name, gpu_id, worker_host)."),
        table(
            ("device", "placement", "GPU", "worker", "trials"),
            [(r.name, r.device, r.gpu, r.host, str(r.n)) for r in per.itertuples()],
        ),
    ]
    return out


def scale_line(name: str, source: dict[str, Any]) -> str:
    block = source.get("scale")
    if block:
        shown = ", ".join(f"{k} {json.dumps(block[k], sort_keys=True)}" for k in sorted(block))
        return f"reduced by the file's scale: block ({shown}); the same grid as the full run"
    if name.endswith("-scaled"):
        return "reduced (run with orch submit --scale; the block is not stored with this sweep)"
    if source:
        return "full (the file's own sizes)"
    return "not recorded (sweep stored before the file's provenance was kept)"


def dataset_text(r: pd.Series) -> str:
    text = f"{r['dataset']}: {r['prompts']} prompts"
    if json_value(r["category"]) is not None:
        text += f", category {r['category']}"
    if json_value(r["prompt_tokens"]) is not None:
        text += f", <= {r['prompt_tokens']} prompt tokens"
    return text


def sampling_points(df: pd.DataFrame) -> list[str]:
    cols = ["temperature", "top_p", "draft_temperature", "draft_top_p"]
    pts = {tuple(json_value(v) for v in r) for r in df[cols].itertuples(index=False)}
    return [
        "(" + ", ".join(val(v) if v is not None else "target's" for v in p) + ")"
        for p in sorted(pts, key=lambda p: tuple(vkey(v) for v in p))
    ]


def predictions(
    store: Store,
    df: pd.DataFrame,
    cf: pd.DataFrame,
    order: dict[str, int],
    predict_with: PredictWith = TRIALS_OWN,
) -> list[Block]:
    """The cost model's predicted speedup on each profiled GPU (`orch compare --predict-on`,
    with `predict_with`'s curves and host time where given)."""
    gpus = sorted({p["device_name"] for p in load_profiles(store) if is_gpu_name(p["device_name"])})
    out: list[Block] = []
    for gpu in gpus:
        try:
            predicted = add_predictions(df, device_curves(store, gpu), gpu, predict_with)
            best = compare_predicted(predicted, (), gpu)
        except QueryError as e:
            out += [("h2", f"Predicted on {gpu}"), ("p", f"No prediction: {e}")]
            continue
        varied = varied_by_method(cf)
        shown = {
            (r["method"], r["params_text"]): params_cell(r["params"], varied[r["method"]])
            for _, r in cf.iterrows()
        }
        best = best.assign(
            _s=best.apply(
                lambda r: (
                    order.get(r["method"], len(order)),
                    r["method"],
                    tuple(
                        vkey(r[c])
                        for c in (
                            "pair",
                            "dataset",
                            "category",
                            "temperature",
                            "top_p",
                            "max_new_tokens",
                            "device",
                        )
                    ),
                ),
                axis=1,
            )
        ).sort_values("_s", kind="stable")
        rows = [
            (
                r["method"],
                r["pair"],
                r["dataset"],
                val(r["temperature"]),
                val(r["top_p"]),
                str(r["max_new_tokens"]),
                shown.get((r["method"], r["params"]), r["params"]),
                num(r["speedup"]),
                num(r["predicted_speedup"]),
            )
            for _, r in best.iterrows()
        ]
        out += [
            ("h2", f"Predicted on {gpu}"),
            (
                "p",
                "engine/cost_model.py from each best config's stored iterations and the "
                f"profiled forward costs of {gpu} (orch profile)"
                + (f", with {predict_with.describe()}" if predict_with.describe() else "")
                + ": measured speedup where the trials ran on that device, else the "
                "prediction alone (each method's best config by it).",
            ),
            table(
                (
                    "method",
                    "pair",
                    "dataset",
                    "T",
                    "top-p",
                    "new tokens",
                    "config",
                    "measured speedup",
                    "predicted speedup",
                ),
                rows,
            ),
        ]
    return out


def distribution_checks(store: Store, name: str, df: pd.DataFrame) -> list[Block]:
    """The stored distribution checks the sweep's sampled trials rest on (engine/
    distribution_check.py, `orch certify`), one row per verifier, tree sampling and setting
    with the number of trials on it; settings with no stored check yet counted apart."""
    rows = df.drop(columns=["per_prompt", "per_iteration"], errors="ignore")
    settings = [row_setting(r) for r in rows[rows["temperature"] > 0].to_dict("records")]
    trials = Counter(key(s) for s in settings if s is not None)
    if not trials:
        return []
    checks = load_checks(store)
    shown = []
    for k in sorted(trials):
        c = checks.get(k)
        if c is None:
            continue
        result = ("passed" if c["passed"] else "FAILED") + ("" if c["support_ok"] else ", support")
        draft = "target's" if k[4:] == k[2:4] else f"T={k[4]:g} top-p={k[5]:g}"
        shown.append(
            (k[0], k[1], f"{k[2]:g}", f"{k[3]:g}", draft, str(trials[k]), str(c["samples"]),
             f"{c['p_value']:.3g}", f"{c['power']:.3f}", result, c["code_version"])
        )  # fmt: skip
    missing = [k for k in trials if k not in checks]
    blocks: list[Block] = [
        ("h2", "Distribution checks"),
        (
            "p",
            "One sample per prompt cannot show a distribution: a sampled trial's certificate is "
            "the chi-square test of its verifier's output law at its setting on a toy pair "
            "(engine/certify/distribution.py, orch certify), against the exact two-token law "
            "at level 1e-4; power is against a verifier emitting the draft's law.",
        ),
    ]
    if shown:
        blocks.append(
            table(
                (
                    "verifier",
                    "trees",
                    "T",
                    "top-p",
                    "draft",
                    "trials",
                    "samples",
                    "p",
                    "power",
                    "result",
                    "code version",
                ),
                shown,
            )
        )
    if missing:
        n = sum(trials[k] for k in missing)
        blocks.append(
            (
                "p",
                f"{len(missing)} settings ({n} trials) have no stored check yet: "
                f"orch certify {name} runs them.",
            )
        )
    return blocks


def failures(store: Store, info: dict[str, Any]) -> list[Block]:
    rows = store.trials(info["id"], (TrialStatus.FAILED,))
    if not rows:
        return []
    shown = sorted({(r["config"], r["error"] or "-") for r in rows})
    return [("h2", "Failed trials"), table(("config", "error (last line)"), shown)]
