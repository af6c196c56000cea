"""bench.gpu's method comparison by prediction: CPU-measured acceptance records, this device's
forward-cost curves and host times, engine/cost_model.py.

Two record formats are read (--record):
- bench/cost_model.py's (per-iteration): `per_prompt` maps each method text ("linear:k=4") to
  one entry per prompt with `prompt_tokens` and GenerationStats.to_dict's `per_iteration`
  lists. Every method in it gets a prediction.
- bench/methods.py's (bench/records/methods_real_pair.json): per-prompt totals only (no
  per-iteration draft forwards), so no method can be predicted from it; its linear row still
  gives HF assisted's tokens per iteration.

Prediction for method m on this device (engine/cost_model.py predict over the record's
generations, with this device's target and draft curves, h_i = m's host time per iteration
measured on this device with the random pair, h_AR = our autoregressive host time per token
measured here); decoding only, the prefill left out of both sides:

    ours_m = (T_gen - T_pre) / M,   ar = (T_AR - T_pre) / M,   speedup_vs_ar = ar / ours_m

HF assisted at a constant draft length k drafts and accepts, greedily, exactly what our linear
k does, so its tokens per iteration are the record's linear-k ones (tau_k, pooled: all emitted
tokens / all iterations), and its predicted time per token is its time per iteration measured
on this device (bench.gpu, constant k, no confidence stop) over tau_k:

    hf = t_iter_HF(k) / tau_k,      vs_hf_assisted_m = hf / ours_m
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.engine_overhead import parse_method
from bench.gpu.models import PAIRS
from engine import cost_model
from engine.cost_model import ForwardCurve

RECORDS = Path(__file__).resolve().parents[1] / "records"  # bench/records
RECORD = RECORDS / "methods_real_pair.json"


def default_record(folder: Path = RECORDS) -> Path:
    """The acceptance record to predict from: the newest per-iteration record in `folder`
    (bench/cost_model.py's JSON, "bench": "cost_model"; not a synthetic pair's, whose
    acceptance is set by its knob), else bench/methods.py's record of
    per-prompt totals (RECORD; its linear row still predicts HF assisted)."""
    found = []
    for path in folder.glob("*.json"):
        try:
            head = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        aligned = isinstance(head, dict) and any(a is not None for a in head.get("aligns", []))
        if isinstance(head, dict) and head.get("bench") == "cost_model" and not aligned:
            found.append((str(head.get("time", "")), path.name, path))
    return max(found)[2] if found else RECORD


def method_texts(record: dict) -> dict[str, tuple[str, dict[str, Any]]]:
    """Method text -> (name, params) of every method in the record, autoregressive included."""
    if isinstance(record.get("per_prompt"), dict):  # bench/cost_model.py
        return {t: parse_method(t) for t in record["per_prompt"]}
    return {m: (m, dict(p or {})) for m, p in record.get("methods", {}).items()}


def profiles(record: dict) -> dict[str, list] | None:
    """Method text -> [cost_model.GenerationProfile] per prompt; None when the record holds no
    per-iteration lists (bench/methods.py's format)."""
    per = record.get("per_prompt")
    if not isinstance(per, dict):
        return None
    return {
        t: [cost_model.from_per_iteration(g["prompt_tokens"], g["per_iteration"]) for g in gens]
        for t, gens in per.items()
    }


def linear_tau(record: dict) -> tuple[str, int, float] | None:
    """(method text, k, pooled tokens per iteration) of the record's first plain linear
    method (no confidence stop), or None."""
    for text, (name, params) in method_texts(record).items():
        if name != "linear" or float(params.get("stop_below", 0) or 0) > 0:
            continue
        k = int(params.get("k", 4))
        per = record.get("per_prompt")
        if isinstance(per, dict):
            emitted = sum(sum(g["per_iteration"]["emitted"]) for g in per[text])
            iterations = sum(len(g["per_iteration"]["emitted"]) for g in per[text])
            return text, k, emitted / iterations
        row = next((r for r in record.get("rows", ()) if r["method"] == text), None)
        if row:
            return text, k, float(row["tokens_per_iteration"])
    return None


def predict_pair(
    record: dict,
    target_curve: dict,
    draft_curve: dict,
    host_s: dict[str, float],
    host_ar_s: float | None,
    hf_constant: dict | None,
) -> dict:
    """The prediction block of one pair (module docstring). Curves: ForwardCurve.to_dict;
    host_s: method text -> host seconds per iteration measured on this device; hf_constant:
    bench.gpu's HF assisted measurement at constant k."""
    out: dict[str, Any] = {"methods": {}}
    tau = linear_tau(record)
    hf_tpt = None
    if tau and hf_constant and hf_constant.get("ms_per_iteration"):
        text, k, t = tau
        if hf_constant["k"] == k:
            hf_tpt = hf_constant["ms_per_iteration"] / t
            out["hf_assisted"] = {
                "k": k,
                "record_method": text,
                "tokens_per_iteration": t,
                "ms_per_iteration": hf_constant["ms_per_iteration"],
                "ms_per_token": hf_tpt,
            }
    gens = profiles(record)
    if gens is None:
        out["available"] = False
        out["reason"] = "the record holds per-prompt totals only (no per-iteration profiles)"
        return out
    if host_ar_s is None:
        out["available"], out["reason"] = False, "no autoregressive host time on this device"
        return out
    target, draft = ForwardCurve.from_dict(target_curve), ForwardCurve.from_dict(draft_curve)
    for text, g in gens.items():
        name = method_texts(record)[text][0]
        h = host_ar_s if name == "autoregressive" else host_s.get(text)
        if h is None:
            out["methods"][text] = {"note": "host time not measured on this device"}
            continue
        p = cost_model.predict(g, target, draft, host_ar_s=host_ar_s, host_s=h)
        ours = (p.seconds - p.prefill_s) / p.new_tokens
        ar = (p.ar_seconds - p.prefill_s) / p.new_tokens
        row = {
            "ms_per_token": 1e3 * ours,
            "ar_ms_per_token": 1e3 * ar,
            "speedup_vs_ar": ar / ours,
            "speedup_vs_ar_with_prefill": p.speedup,
            "host_ms_per_iteration": 1e3 * h,
            "tokens_per_iteration": p.new_tokens / sum(len(x.iterations) for x in g),
        }
        if hf_tpt is not None:
            row["vs_hf_assisted"] = hf_tpt / (1e3 * ours)
        out["methods"][text] = row
    rows = {t: r for t, r in out["methods"].items() if "ms_per_token" in r}
    out["available"] = bool(rows)
    chains = ("autoregressive", "linear")  # the best *tree* method leaves these out
    trees = {t: r for t, r in rows.items() if method_texts(record)[t][0] not in chains}
    if trees:
        best = min(trees, key=lambda t: trees[t]["ms_per_token"])
        out["best_tree"] = {"method": best, **trees[best]}
    return out


def pair_prediction(record: dict, res: dict, tc: dict, dc: dict, ar: dict | None) -> dict:
    """predict_pair's prediction for one pair section `res`, from the curves of its
    target and draft and our autoregressive measurement `ar` on this device, all of the
    engine its methods ran on."""
    host = {t: r["host_ms_per_iteration"] / 1e3 for t, r in res["methods"].items()}
    h_ar = ar["host_ms_per_iteration"] / 1e3 if ar else None
    return predict_pair(record, tc, dc, host, h_ar, res["hf_assisted"].get("constant_k"))


def from_report(path: Path, record_path: Path, curves_from: Path | None = None) -> dict:
    """--from-report: a stored report with each pair's predictions computed again from its own
    curves and host times and the CPU record `record_path` (for a run whose time limit cut the
    prediction, or to predict from a newer record without the device). curves_from: another
    report of the same device whose curves fill the ones this report lacks (a model and engine
    this run did not reach); what was taken is listed under "curves_from"."""
    report = json.loads(path.read_text())
    record = json.loads(record_path.read_text())
    report["record"] = str(record_path)
    models = report["models"]
    if curves_from:
        other = json.loads(curves_from.read_text())
        taken = []
        for name, m in other["models"].items():
            for engine, c in m.get("curves", {}).items():
                entry = models.setdefault(name, {"autoregressive": {}, "curves": {}})
                if engine not in entry.setdefault("curves", {}):
                    entry["curves"][engine] = c
                    taken.append(f"{name} {engine}")
        report["curves_from"] = {"report": str(curves_from), "time": other["time"], "curves": taken}
    for pname, res in report["pairs"].items():
        tname, dname = PAIRS[pname]
        engine = next((r["engine"] for r in res["methods"].values()), "fast")
        # the draft built with its target's vocabulary ("<name>@vocab<V>") where it has this
        # engine's curve, else the draft of its own vocabulary
        drafts = sorted((k for k in models if k.split("@")[0] == dname), key=lambda k: "@" not in k)
        drafts = [k for k in drafts if engine in models[k].get("curves", {})]
        tc = models.get(tname, {}).get("curves", {}).get(engine)
        dc = models[drafts[0]]["curves"][engine] if drafts else None
        if tc and dc:
            ar = models[tname]["autoregressive"].get(f"ours_{engine}")
            res["prediction"] = pair_prediction(record, res, tc, dc, ar)
            res["prediction_curves"] = {"target": tname, "draft": drafts[0]}
            cut = f"{pname} prediction:"
            report["skipped"] = [x for x in report["skipped"] if not x.startswith(cut)]
    return report
