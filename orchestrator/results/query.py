"""`orch query` and `orch compare` over the results frame (frame.py): configs
ranked by a metric within each group, and each method's best config per pair, setting and
machine with its speedup's bootstrap interval (intervals.py), the spread over prompts, its
rank (ties where intervals overlap the fastest's) and its speedup per task; the methods of
one setting on several machines side by side (by_machine)."""

from __future__ import annotations

import functools
import math

import pandas as pd

from db.models import METRIC_COLUMNS
from engine.datasets import task_of
from orchestrator.results.frame import BEST_BY, PREDICTED, QueryError, apply_where, sampling_label
from orchestrator.results.intervals import COLUMNS as INTERVALS
from orchestrator.results.intervals import overlaps
from orchestrator.results.settings import BASELINE, CONFIG_KEY, SETTINGS, settings_keys
from orchestrator.results.values import cell_value


def query(
    df: pd.DataFrame,
    best_by: str,
    where: tuple[str, ...] = (),
    top: int | None = 20,
    by_group: bool = True,
) -> pd.DataFrame:
    """Configs (grouped over repeats) ranked by the mean of `best_by`: within each GROUP
    (pair, dataset slice, sampling, device; `rank` restarts at 1), or across all rows when
    `by_group` is False. `top` rows per group; `baseline` marks autoregressive rows. Every
    metric column is there as a mean."""
    if best_by not in BEST_BY:
        raise QueryError(
            f"metric {best_by!r} is not allowed for --best-by (allowed: {', '.join(BEST_BY)})"
        )
    df = apply_where(df, where)
    if df.empty:
        raise QueryError("no finished trials match the --where filters")
    metrics = [m for m in METRIC_COLUMNS if m in df.columns and m not in CONFIG_KEY]
    metrics += ["speedup", "ar_throughput"] + [c for c in PREDICTED if c in df.columns]
    params = [c for c in df.columns if c.startswith("param.")]
    g = df.groupby(list(CONFIG_KEY), dropna=False, sort=False)
    out = g.agg(
        repeats=(best_by, "size"),
        **{f"{best_by}_std": (best_by, "std")},
        **{m: (m, "mean") for m in metrics},
        **{c: (c, "first") for c in params},
        **_placement_aggs(df),
        **_certificate_aggs(df),
    ).reset_index()
    out.insert(0, "pair", out["target"] + "/" + out["draft"])
    out["baseline"] = out["method"] == BASELINE
    out["group"] = _group_label(out) if by_group else "all"
    out = out.sort_values(
        best_by, ascending=not BEST_BY[best_by], na_position="last", kind="stable"
    )
    if by_group:  # groups in the order they first appear in the database
        first = _group_label(df.assign(pair=df["target"] + "/" + df["draft"]))
        order = {k: i for i, k in enumerate(dict.fromkeys(first))}
        out = out.sort_values("group", key=lambda c: c.map(order), kind="stable")
    out.insert(0, "rank", out.groupby("group", sort=False).cumcount() + 1)
    if top:
        out = out[out["rank"] <= top]
    return out.reset_index(drop=True)


def _joined(values: pd.Series) -> str:
    return ", ".join(sorted({str(v) for v in values if v is not None and v == v and v != ""}))


def _placement_aggs(df: pd.DataFrame) -> dict:
    """A config's placement over its repeats (device names and hosts joined, the speedup's
    note) and its intervals (the same on each of its trials)."""
    aggs = {
        "device_name": ("device_name", _joined),
        "host": ("host", _joined),
        "speedup_note": ("speedup_note", "first"),
    }
    return {**aggs, **{c: (c, "first") for c in INTERVALS if c in df.columns}}


def _certificate_aggs(df: pd.DataFrame) -> dict:
    """A config's certificate columns over its repeats: the worst `lossless` word, the
    first repeat's `ar_equal` (orchestrator/results/certificates.py)."""
    if "lossless" not in df.columns:
        return {}
    from orchestrator.results.certificates import worst  # lazy: torch (engine.certify)

    return {"lossless": ("lossless", worst), "ar_equal": ("ar_equal", "first")}


def _group_label(df: pd.DataFrame) -> pd.Series:
    """One line naming a row's group for `query`: every SETTINGS field but max_new_tokens
    and engine (pair with its revisions, dataset slice, sampling, device and dtype, placement,
    machine)."""

    def label(r) -> str:
        pair = pair_label(r)
        data = f"{r['dataset']} ({r['prompts']} prompts"
        data += f", {r['category']})" if cell_value(r["category"]) is not None else ")"
        if cell_value(r["prompt_tokens"]) is not None:
            data += f" <= {r['prompt_tokens']} prompt tokens"
        if cell_value(r["chat"]) is not None:
            data += " chat" if r["chat"] else " plain"
        sampling = sampling_label(r["temperature"], r["top_p"])
        placed = f" · {r['placement']}" if cell_value(r["placement"]) is not None else ""
        return f"{pair} · {data} · {sampling} · {r['device']}/{r['dtype']}{placed} · {r['machine']}"

    return df.apply(label, axis=1)


def pair_label(r) -> str:
    """`target/draft`, each with `@revision` where the trial pinned one (engine/hub.py)."""
    names = []
    for role in ("target", "draft"):
        rev = cell_value(r[f"{role}_revision"])
        names.append(r[role] + (f"@{str(rev)[:12]}" if rev is not None else ""))
    return "/".join(names)


def compare(
    df: pd.DataFrame, where: tuple[str, ...] = (), rank_by: str = "speedup"
) -> pd.DataFrame:
    """Each method's best config (by mean `rank_by`: the measured speedup, or
    "predicted_speedup") per pair, setting and machine: its params, speedup with its
    bootstrap interval (`speedup_lo`, `speedup_hi`; intervals.py), the spread of that speedup
    over prompts x repeats (per-prompt speedups against the baseline's mean on the same prompt;
    over repeats alone when the frame has no per-prompt data), tau with its interval and
    acceptance, `rank` within its setting and machine by speedup and `tied` (its interval
    overlaps the fastest method's, so the data cannot tell them apart), and `speedup.<task>`
    per Spec-Bench task or category (pooled tokens / time over that task's prompts, over the
    baseline's) where the dataset has several. A setting whose machine has no autoregressive
    trial keeps its methods, by throughput, with an empty speedup and `speedup_note` saying
    why. With a `predicted_speedup` column (orchestrator/results/profiles.py predict_frame),
    its mean per config comes beside the measured one."""
    predicted = "predicted_speedup" in df.columns
    df = apply_where(df, where)
    if rank_by != "speedup":
        df = df[df[rank_by].notna()]  # a prediction needs no measured baseline
    if df.empty:
        raise QueryError(
            "the device has no curves for these trials' models at their engine and dtype "
            "(see --predict-engine and --predict-dtype)"
            if rank_by != "speedup"
            else "no finished trials match the --where filters"
        )
    if rank_by == "speedup" and df["speedup"].isna().all():
        raise QueryError(_no_baseline(df))
    df = df.assign(_config=settings_keys(df, CONFIG_KEY), _skey=settings_keys(df))
    g = (
        df.groupby(list(CONFIG_KEY), dropna=False, sort=False)
        .agg(
            speedup=("speedup", "mean"),
            speedup_std=("speedup", "std"),
            speedup_min=("speedup", "min"),
            speedup_max=("speedup", "max"),
            samples=("speedup", "size"),
            throughput=("throughput", "mean"),
            ar_throughput=("ar_throughput", "mean"),
            tokens_per_iteration=("tokens_per_iteration", "mean"),
            acceptance_rate=("acceptance_rate", "mean"),
            repeats=("speedup", "size"),
            _config=("_config", "first"),
            _skey=("_skey", "first"),
            **({"predicted_speedup": ("predicted_speedup", "mean")} if predicted else {}),
            **_placement_aggs(df),
            **_certificate_aggs(df),
        )
        .reset_index()
    )
    g["pair"] = g["target"] + "/" + g["draft"]
    best = (
        g.sort_values([rank_by, "throughput"], ascending=False, kind="stable", na_position="last")
        .groupby([*SETTINGS, "method"], dropna=False, sort=False)
        .head(1)
    )
    order = {m: i for i, m in enumerate(dict.fromkeys([BASELINE, *df["method"]]))}
    best = best.assign(_o=best["method"].map(order)).sort_values(["_o", "pair"], kind="stable")
    best = best.reset_index(drop=True)
    for c in INTERVALS:  # a frame without per-prompt data has no intervals
        if c not in best.columns:
            best[c] = math.nan
    best = _ranks(best, rank_by)
    categories: list[str] = []
    if "per_prompt" in df.columns:
        pf = prompt_frame(df)
        if not pf.empty:
            best, categories = _prompt_spread(best, pf)
    best["spread_over"] = "prompts x repeats" if "per_prompt" in df.columns else "repeats"
    cols = [
        "method",
        "pair",
        "dataset",
        "category",
        "temperature",
        "top_p",
        "max_new_tokens",
        "prompts",
        "prompt_tokens",
        "chat",
        "device",
        "dtype",
        "engine",
        "target_revision",
        "draft_revision",
        "placement",
        "machine",
        "speedup",
        "speedup_lo",
        "speedup_hi",
        "rank",
        "tied",
        "speedup_std",
        "speedup_min",
        "speedup_max",
        "samples",
        "spread_over",
        "throughput",
        "ar_throughput",
        "tokens_per_iteration",
        "tau_lo",
        "tau_hi",
        "acceptance_rate",
        "params",
        "repeats",
        "speedup_note",
        "device_name",
        "host",
        *(["predicted_speedup"] if predicted else []),
        *[c for c in ("lossless", "ar_equal") if c in best.columns],
        *[f"speedup.{c}" for c in categories],
    ]
    return best[cols]


def _no_baseline(df: pd.DataFrame) -> str:
    """Why no trial has a speedup: no autoregressive trial at all, or none on their machines."""
    notes = sorted({n for n in df["speedup_note"] if n})
    machines = ", ".join(sorted(set(df["machine"])))
    if any(n.startswith("no autoregressive trial on ") for n in notes):
        return (
            f"no autoregressive trial with the same settings ran on {machines}; a speedup "
            "is never taken across machines: run `- name: autoregressive` there too"
        )
    return (
        "no trial has an autoregressive baseline with the same pair, dataset, sampling and "
        "max_new_tokens; add `- name: autoregressive` to the sweep"
    )


def _ranks(best: pd.DataFrame, rank_by: str) -> pd.DataFrame:
    """`rank` (1 = the fastest by `rank_by` within each setting and machine; by throughput
    where the machine has no baseline) and `tied`: not the fastest, but its speedup interval
    overlaps the fastest's, so the data cannot tell the two apart."""
    best = best.assign(rank=math.nan, tied=False)
    for _, block in best.groupby("_skey", sort=False):
        by = rank_by if block[rank_by].notna().any() else "throughput"
        rank = block[by].rank(ascending=False, method="first")
        best.loc[block.index, "rank"] = rank
        if by == "speedup":
            w = block.loc[rank.idxmin()]
            best.loc[block.index, "tied"] = [
                i != w.name and overlaps(r.speedup_lo, r.speedup_hi, w.speedup_lo, w.speedup_hi)
                for i, r in block.iterrows()
            ]
    return best


# by_machine's columns per machine: name@machine <- compare's column
SIDE_BY_SIDE = {
    "speedup": "speedup",
    "lo": "speedup_lo",
    "hi": "speedup_hi",
    "rank": "rank",
    "tied": "tied",
}


def by_machine(best: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """For each setting (pair, dataset slice, sampling, new tokens, engine; any device kind
    and dtype) measured on more than one machine: its label and one row per method with, per
    machine, `speedup@<machine>` (its best config's), `lo@`, `hi@`, `rank@` and `tied@`."""
    other = [c for c in SETTINGS if c not in ("target", "draft", "machine", "device", "dtype")]
    out = []
    for key, block in best.groupby(["pair", *other], dropna=False, sort=False):
        machines = list(dict.fromkeys(block["machine"]))
        if len(machines) < 2:
            continue
        rows = {}
        for _, r in block.iterrows():
            row = rows.setdefault(r["method"], {"method": r["method"]})
            for name, c in SIDE_BY_SIDE.items():
                row[f"{name}@{r['machine']}"] = r[c]
        label = dict(zip(["pair", *other], key))
        out.append((_setting_label(label), pd.DataFrame(list(rows.values()))))
    return out


def _setting_label(r: dict) -> str:
    sel = f", {r['category']}" if cell_value(r["category"]) is not None else ""
    sampling = sampling_label(r["temperature"], r["top_p"])
    return (
        f"{r['pair']} · {r['dataset']}{sel} · {sampling} · {r['max_new_tokens']} new tokens"
        f" · {r['engine']}"
    )


# measured (device-specific) columns of `compare`: profiles.compare_predicted blanks them when
# the trials ran on another kind of device than the predicted one
MEASURED = [
    "speedup",
    "speedup_lo",
    "speedup_hi",
    "speedup_std",
    "speedup_min",
    "speedup_max",
    "throughput",
    "ar_throughput",
]


@functools.lru_cache(maxsize=None)
def _tasks(dataset: str) -> dict[str, str]:
    return task_of(dataset)


def prompt_frame(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (trial, prompt) from `per_prompt`: _config, _skey, method, id, task (the
    Spec-Bench task of its category; the category elsewhere), new_tokens, total_s. Prompts
    recorded without timings are left out."""
    rows = []
    cols = [df[c] for c in ("_config", "_skey", "method", "dataset", "per_prompt")]
    for config, skey, method, dataset, per_prompt in zip(*cols):
        tasks = _tasks(dataset)
        for p in per_prompt or []:
            if not isinstance(p, dict) or not p.get("total_s") or "new_tokens" not in p:
                continue
            cat = p.get("category")
            rows.append(
                {
                    "_config": config,
                    "_skey": skey,
                    "method": method,
                    "id": str(p.get("id")),
                    "task": tasks.get(cat, cat) if cat is not None else None,
                    "new_tokens": p["new_tokens"],
                    "total_s": p["total_s"],
                }
            )
    return pd.DataFrame(
        rows, columns=["_config", "_skey", "method", "id", "task", "new_tokens", "total_s"]
    )


def _prompt_spread(best: pd.DataFrame, pf: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """`best` with the per-prompt speedup spread and per-task speedups of each winner."""
    pf = pf.assign(tp=pf["new_tokens"] / pf["total_s"])
    base = pf[pf["method"] == BASELINE]
    ar = base.groupby(["_skey", "id"])["tp"].mean().rename("ar_tp")
    pf = pf.join(ar, on=["_skey", "id"])
    pf["speedup"] = pf["tp"] / pf["ar_tp"]
    mine = pf[pf["_config"].isin(best["_config"]) & pf["speedup"].notna()]
    spread = mine.groupby("_config")["speedup"].agg(["std", "min", "max", "size"])
    best = best.copy()
    for col, agg in (("speedup_std", "std"), ("speedup_min", "min"), ("speedup_max", "max")):
        best[col] = best["_config"].map(spread[agg]).fillna(best[col])
    best["samples"] = best["_config"].map(spread["size"]).fillna(best["samples"]).astype(int)
    tasks = list(dict.fromkeys(t for t in pf["task"] if t is not None))
    if len(tasks) < 2:
        return best, []

    def pooled(frame: pd.DataFrame, key: str) -> pd.Series:
        s = frame.groupby([key, "task"])[["new_tokens", "total_s"]].sum()
        return s["new_tokens"] / s["total_s"]

    method_tp, ar_tp = pooled(mine, "_config"), pooled(base, "_skey")
    for t in tasks:
        best[f"speedup.{t}"] = [
            method_tp.get((c, t), math.nan) / ar_tp.get((k, t), math.nan)
            for c, k in zip(best["_config"], best["_config"].map(_config_skey(pf)))
        ]
    return best, tasks


def _config_skey(pf: pd.DataFrame) -> dict[str, str]:
    return dict(zip(pf["_config"], pf["_skey"]))
