"""Figures from the results frame (matplotlib, Agg backend, PNG files).

For every non-baseline method, and every grid axis that varies among its trials:
- `speedup_<method>_<axis>.png`: speedup against the axis value, one line per pair: the mean
  over the other axes and repeats (solid) and the best config at that value (dashed);
- `acceptance_<method>_depth.png`: acceptance rate and tokens per iteration against depth
  (methods with a `depth` parameter);
- `speedup_by_method.png`: each method's best speedup per pair (bars).
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from orchestrator.report import BASELINE, CONFIG_KEY, QueryError, compare


def make_plots(df: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        return _plots(plt, df, out)
    except OSError as e:  # orchestrator.report.check_output_dir ran first; the disk said no
        raise QueryError(f"cannot write plots to {out_dir}: {e.strerror or e}") from None


def _plots(plt, df: pd.DataFrame, out: Path) -> list[Path]:
    files: list[Path] = []
    has_base = df["speedup"].notna()
    for method, g in df[(df["method"] != BASELINE) & has_base].groupby("method", sort=False):
        for axis in _axes(g):
            files.append(_speedup_vs(plt, g, method, axis, out))
        if "param.depth" in g and g["param.depth"].notna().any():
            files.append(_acceptance_vs_depth(plt, g, method, out))
    try:
        best = compare(df)
    except QueryError:
        best = None
    if best is not None and not best.empty:
        files.append(_bars(plt, best, out))
    if not files:
        raise QueryError(
            "nothing to plot: no trial has an autoregressive baseline with the "
            "same pair, dataset, sampling and max_new_tokens"
        )
    return files


def _axes(g: pd.DataFrame) -> list[str]:
    cols = [c for c in g.columns if c.startswith("param.")] + ["max_new_tokens", "temperature"]
    return [
        c
        for c in cols
        if g[c].notna().any()
        and g[c].nunique(dropna=True) > 1
        and pd.to_numeric(g[c], errors="coerce").notna().all()
    ]


def _speedup_vs(plt, g: pd.DataFrame, method: str, axis: str, out: Path) -> Path:
    name = axis.removeprefix("param.")
    fig, ax = plt.subplots(figsize=(6, 4))
    per_config = g.groupby(CONFIG_KEY + [axis, "pair"], dropna=False)["speedup"].mean()
    per_config = per_config.reset_index()
    for pair, p in per_config.groupby("pair", sort=False):
        mean = p.groupby(axis)["speedup"].mean()
        best = p.groupby(axis)["speedup"].max()
        (line,) = ax.plot(mean.index, mean.values, marker="o", label=f"{pair} (mean)")
        ax.plot(
            best.index,
            best.values,
            marker="^",
            linestyle="--",
            color=line.get_color(),
            label=f"{pair} (best)",
        )
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xlabel(name)
    ax.set_ylabel(f"speedup over {BASELINE}")
    ax.set_title(f"{method}: speedup vs {name}")
    ax.legend(fontsize=7)
    return _save(fig, plt, out / f"speedup_{_safe(method)}_{_safe(name)}.png")


def _acceptance_vs_depth(plt, g: pd.DataFrame, method: str, out: Path) -> Path:
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 4))
    for pair, p in g.groupby("pair", sort=False):
        m = p.groupby("param.depth")[["acceptance_rate", "tokens_per_iteration"]].mean()
        a1.plot(m.index, m["acceptance_rate"], marker="o", label=pair)
        a2.plot(m.index, m["tokens_per_iteration"], marker="o", label=pair)
    a1.set_xlabel("depth"), a1.set_ylabel("acceptance rate")
    a2.set_xlabel("depth"), a2.set_ylabel("tokens per iteration")
    a1.legend(fontsize=7)
    fig.suptitle(f"{method}: acceptance vs depth")
    return _save(fig, plt, out / f"acceptance_{_safe(method)}_depth.png")


def _bars(plt, best: pd.DataFrame, out: Path) -> Path:
    table = best.groupby(["method", "pair"], sort=False)["speedup"].max().unstack("pair")
    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(table)), 4))
    table.plot.bar(ax=ax, rot=30)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_ylabel(f"best speedup over {BASELINE}")
    ax.legend(fontsize=7)
    return _save(fig, plt, out / "speedup_by_method.png")


def _save(fig, plt, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _safe(name: str) -> str:
    return re.sub(r"[^\w.-]+", "_", name)
