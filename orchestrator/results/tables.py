"""Text tables of `orch query` and `orch compare` (format table), within 100 columns.

Both name metrics as Spec-Bench does in their legend: tau (its "mean accepted tokens") is our
`tokens_per_iteration`, not our `mean_accepted_length` (tau minus the bonus token).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from orchestrator.results.frame import BEST_BY, QueryError, frame_column, sampling_label
from orchestrator.results.output import render
from orchestrator.results.query import by_machine
from orchestrator.results.settings import BASELINE
from orchestrator.results.values import cell_value

# Spec-Bench's names for our metrics (its tables' "mean accepted tokens" is tau, our
# tokens_per_iteration; our mean_accepted_length is tau minus the bonus token)
SHORT = {
    "tokens_per_iteration": "tau",
    "acceptance_rate": "accept",
    "throughput": "tok/s",
    "repeats": "n",
    "max_new_tokens": "max_new",
}
QUERY_COLUMNS = ["rank", "method", "{best}", "{best}_std", "speedup", "predicted_speedup",
                 "tokens_per_iteration", "acceptance_rate", "repeats", "params"]  # fmt: skip


def query_columns(best_by: str, columns: str | None, rows: pd.DataFrame) -> list[str]:
    """The columns `orch query` shows: the defaults (QUERY_COLUMNS), `a,b,c` instead, or
    `+a,b` added to them (metric, config, placement or param names; `params.k` or `k`)."""
    defaults = [c.format(best=best_by) for c in QUERY_COLUMNS]
    defaults = list(dict.fromkeys(c for c in defaults if c in rows.columns))
    if not columns:
        return defaults
    add = columns.startswith("+")
    wanted = []
    for name in columns.removeprefix("+").split(","):
        name = name.strip()
        if not name:
            continue
        col = frame_column(name)
        if col not in rows.columns and f"param.{col}" in rows.columns:
            col = f"param.{col}"
        if col not in rows.columns or col == "group":
            known = sorted(c for c in rows.columns if c != "group")
            raise QueryError(f"unknown --columns name {name!r} (known: {', '.join(known)})")
        wanted.append(col)
    head = ["rank", "method"]
    return list(dict.fromkeys(head + (defaults if add else []) + wanted))


def render_query(
    ranked: pd.DataFrame,
    best_by: str,
    columns: list[str],
    varied: dict[str, list[str]] | None = None,
    width: int = 100,
) -> str:
    """Table text: a legend, then one block per group (its label, then its ranked rows).
    Lines stay within `width`: params too long for it show the ones `varied` lists for the
    method (its grid axes), other cells are cut (json/csv show them whole)."""
    order = "larger" if BEST_BY[best_by] else "smaller"
    lines = [
        f"ranked by {best_by} ({order} is better; mean over repeats) within each group; * baseline",
        "tau = tokens_per_iteration (Spec-Bench's mean accepted tokens); speedup = tok/s over"
        " baseline's",
    ]
    shown = ranked.assign(
        method=ranked["method"] + ranked["baseline"].map({True: "*", False: ""}),
        acceptance_rate=ranked["acceptance_rate"].where(~ranked["baseline"]),
    )
    shown = shown.rename(columns={c: c.removeprefix("param.") for c in shown.columns})
    columns = [c.removeprefix("param.") for c in columns]
    names = {**SHORT, f"{best_by}_std": "±std"}
    for label, block in shown.groupby("group", sort=False):
        lines += ["", *_wrap(label if label != "all" else "all groups", width)]
        note = next((n for n in block.get("speedup_note", []) if n), "")
        if note and block["speedup"].isna().all():
            lines.append(f"{note}: no speedups (never across machines)")
        table = block[columns].rename(columns=names)
        table = table.assign(
            **{c: table[c].map(_g) for c in table.columns if table[c].dtype.kind == "f"}
        )
        lines.append(_fit(_render_params(table, block["method"], varied or {}, width), width))
    return "\n".join(lines)


def varied_params(df: pd.DataFrame) -> dict[str, list[str]]:
    """Method -> the parameters that take more than one value among its rows (grid axes)."""
    out = {}
    for method, g in df.groupby("method", sort=False):
        cols = [c for c in g.columns if c.startswith("param.") and g[c].notna().any()]
        out[method] = [c.removeprefix("param.") for c in cols if g[c].astype(str).nunique() > 1]
    return out


def _render_params(
    table: pd.DataFrame, methods: pd.Series, varied: dict[str, list[str]], width: int
) -> str:
    """render(table) where a `params` cell that would pass `width` keeps only the method's
    varied parameters, with a count of the fixed ones left out."""
    col = next((c for c in ("params", "winning config") if c in table.columns), None)
    if col is None:
        return render(table, "table")
    others = render(table.drop(columns=[col]), "table").split("\n")
    room = max(width - max(len(ln) for ln in others) - 2, len(col))

    def short(params: str, method: str) -> str:
        if len(params) <= room:
            return params
        parts = params.split(",")
        keep = [p for p in parts if p.split("=", 1)[0].strip() in varied.get(method, [])]
        if not keep:
            return params[: room - 1] + "…"
        return ",".join(keep) + f" (+{len(parts) - len(keep)} fixed)"

    cells = [short(str(p), str(m).rstrip("*")) for p, m in zip(table[col], methods)]
    return render(table.drop(columns=[col]).assign(**{col: cells}), "table")  # params last


def _wrap(label: str, width: int) -> list[str]:
    """A group's label on as many lines as `width` needs, broken between its ` · ` parts."""
    out = [""]
    for part in label.split(" · "):
        joined = f"{out[-1]} · {part}" if out[-1] else part
        if len(joined) <= width or not out[-1]:
            out[-1] = joined
        else:
            out.append(f"  · {part}")
    return [_fit(x, width) for x in out]


def _fit(text: str, width: int) -> str:
    return "\n".join(ln if len(ln) <= width else ln[: width - 1] + "…" for ln in text.split("\n"))


def render_compare(
    best: pd.DataFrame, varied: dict[str, list[str]] | None = None, width: int = 100
) -> str:
    """Spec-Bench style text: per pair, setting and machine, one row per method (its winning
    config's speedup with its 95% interval, rank (`=1`: tied with the fastest, the intervals
    overlap), spread, tau with its interval, acceptance, tok/s, certificate and params), then
    speedup per task; last, each setting measured on several machines side by side."""
    over = best["spread_over"].iloc[0] if len(best) else "repeats"
    by = "mean speedup"
    if "predicted_speedup" in best.columns and len(best) and best["speedup"].isna().all():
        by = "predicted speedup"  # profiles.compare_predicted on another kind of device
    lines = [
        f"each method's best config by {by} (tok/s over autoregressive: same settings and machine)",
        "95% CI: paired bootstrap over prompts and repeats (docs/report.md); rank =1: tied, its",
        "CI overlaps the fastest's; tau = tokens_per_iteration (Spec-Bench's mean accepted tokens)",
        f"json/csv also give the spread of each speedup over {over} (speedup_std, _min, _max)",
    ]
    setting = ["pair", "dataset", "category", "temperature", "top_p", "max_new_tokens", "device"]
    cats = [c for c in best.columns if c.startswith("speedup.")]
    for key, block in best.groupby([*setting, "machine"], dropna=False, sort=False):
        pair, dataset, category, t, top_p, mnt, device, machine = key
        sel = f", {category}" if cell_value(category) is not None else ""
        head = f"{pair} · {dataset}{sel} · {sampling_label(t, top_p)} · {mnt} new tokens · {device}"
        lines += ["", *_wrap(f"{head} · {machine}", width), _fit(_verdict(block), width)]
        block = block.sort_values("rank", kind="stable") if block["rank"].notna().any() else block
        block = block.assign(
            acceptance_rate=block["acceptance_rate"].where(block["method"] != BASELINE)
        )
        table = pd.DataFrame(
            {
                "method": block["method"],
                "speedup": block.apply(_speedup_cell, axis=1),
                "95% CI": [_ci(lo, hi) for lo, hi in zip(block["speedup_lo"], block["speedup_hi"])],
                "rank": [_rank(r, t) for r, t in zip(block["rank"], block["tied"])],
                "tau": block["tokens_per_iteration"].map(_num),
                "tau CI": [_ci(lo, hi) for lo, hi in zip(block["tau_lo"], block["tau_hi"])],
                "accept": block["acceptance_rate"].map(_num),
                "tok/s": block["throughput"].map(lambda v: _num(v, ".1f")),
                **({"lossless": block["lossless"]} if "lossless" in block.columns else {}),
                "winning config": [
                    (p or "-") + (f" engine={e}" if e not in (None, "eager") else "")
                    for p, e in zip(block["params"], block["engine"])
                ],
            }
        )
        lines.append(_fit(_render_params(table, block["method"], varied or {}, width), width))
        shown = [c for c in cats if block[c].notna().any()]
        if shown:
            lines += ["", "speedup per task (pooled tok/s over the task's prompts)"]
            per = block[["method", *shown, "speedup"]].rename(
                columns={"speedup": "overall", **{c: c.removeprefix("speedup.") for c in shown}}
            )
            per = per.assign(**{c: per[c].map(_x) for c in per.columns if c != "method"})
            lines.append(_fit(render(per, "table"), width))
    for label, side in by_machine(best):
        lines += ["", _fit(f"side by side: {label}", width), _fit(_render_machines(side), width)]
    return "\n".join(lines)


def _verdict(block: pd.DataFrame) -> str:
    """One line: the fastest method and those the intervals cannot tell from it, or why the
    block has no speedups."""
    if block["speedup"].isna().all():
        note = next((n for n in block["speedup_note"] if n), "no autoregressive trial")
        return f"{note}: no speedups (never across machines); ranked by tok/s"
    first = block[block["rank"] == 1].iloc[0]
    tied = list(block.loc[block["tied"].astype(bool), "method"])
    if math.isnan(first["speedup_lo"]):
        return f"fastest: {first['method']} (no interval: no per-prompt timings)"
    if tied:
        return f"fastest: {first['method']}, tied with {', '.join(tied)} (95% CIs overlap)"
    return f"fastest: {first['method']} (no other 95% CI overlaps its)"


def _render_machines(side: pd.DataFrame) -> str:
    """by_machine's table: per method, each machine's speedup [CI] and rank."""
    machines = [c.removeprefix("speedup@") for c in side.columns if c.startswith("speedup@")]
    table = pd.DataFrame({"method": side["method"]})
    for m in machines:
        table[m] = [
            "-" if pd.isna(v) else f"{v:.2f}x ({_ci(lo, hi)}) #{_rank(r, t, tie='1 tie')}"
            for v, lo, hi, r, t in zip(
                side[f"speedup@{m}"], side[f"lo@{m}"], side[f"hi@{m}"], side[f"rank@{m}"],
                side[f"tied@{m}"],
            )
        ]  # fmt: skip
    return render(table, "table")


def _ci(lo: Any, hi: Any) -> str:
    return "-" if pd.isna(lo) or pd.isna(hi) else f"{lo:.2f}-{hi:.2f}"


def _rank(rank: Any, tied: Any, tie: str = "=1") -> str:
    """A method's rank: its place by speedup, `tie` where its interval overlaps the first's."""
    if pd.isna(rank):
        return "-"
    return tie if bool(tied) else f"{int(rank)}"


def _g(v: Any) -> str:
    """3 significant digits, at least one decimal from 100 up; "-" for NaN."""
    return "-" if pd.isna(v) else (f"{v:.1f}" if abs(v) >= 100 else f"{v:.3g}")


def _num(v: Any, fmt: str = ".2f") -> str:
    return "-" if pd.isna(v) else format(v, fmt)


def _x(v: Any) -> str:
    return "-" if pd.isna(v) else f"{v:.2f}x"


def _speedup_cell(row: pd.Series) -> str:
    """ "0.72x" measured; with a prediction "0.72x (predicted 0.70x)", or "predicted 1.9x"
    alone where nothing was measured on the predicted device."""
    measured = f"{row['speedup']:.2f}x" if pd.notna(row["speedup"]) else ""
    if "predicted_speedup" not in row or pd.isna(row["predicted_speedup"]):
        return measured or "-"
    pred = f"predicted {row['predicted_speedup']:.2f}x"
    return f"{measured} ({pred})" if measured else pred
