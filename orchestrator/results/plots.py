"""Figures from the results frame (matplotlib, Agg backend, PNG files), one question each.

For every non-baseline method, and every numeric grid axis that varies among its trials
(method parameters, `max_new_tokens`, `temperature`):
- `speedup_<method>_<axis>.png`: how speedup depends on the axis: one panel per pair, the
  best config at each value (line) and the range over the other axes' configs (band);
- `acceptance_<method>_depth.png`, `tokens_per_iteration_<method>_depth.png`: acceptance
  rate and tokens per iteration against depth (methods with a `depth` parameter), one panel
  per pair;
- `speedup_by_method.png`: each method's best speedup per pair (bars, value on each).

An axis whose values are all integers gets integer ticks; every axis label carries its unit.
`figures` builds the figures (tests inspect them), `make_plots` writes them.
"""

from __future__ import annotations

import numbers
import re
from pathlib import Path

import numpy as np
import pandas as pd

from orchestrator.results.frame import QueryError
from orchestrator.results.query import compare
from orchestrator.results.settings import BASELINE, CONFIG_KEY

# Units of the axes figures use (method parameters by their paper names).
UNITS = {
    "max_new_tokens": "tokens",
    "depth": "tree levels",
    "branch": "children per node",
    "k": "draft tokens",
    "budget": "tree nodes",
    "width": "nodes per level",
    "threshold": "draft probability",
    "D0": "tree levels",  # DynaTree's paper variant (engine/drafters/dynatree/build.py)
    "D_max": "tree levels",
    "B_min": "children per node",
    "B_mid": "children per node",
    "B_max": "children per node",
    "tau": "draft probability",
    "N_max": "tree nodes",
    "temperature": "",
    "top_p": "probability mass",
}
SPEEDUP = f"speedup over {BASELINE} (×)"
MAX_TICKS = 12  # an integer axis with more values gets integer ticks matplotlib picks


def make_plots(df: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    import matplotlib  # lazy: matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: matplotlib

    out = Path(out_dir)
    figs = figures(df)  # "nothing to plot" before the folder is made
    try:
        out.mkdir(parents=True, exist_ok=True)
        files = []
        for name, fig in figs:
            fig.savefig(out / name, dpi=110)
            plt.close(fig)
            files.append(out / name)
        return files
    except OSError as e:  # orchestrator.results.output.check_output_dir ran first; the disk said no
        raise QueryError(f"cannot write plots to {out_dir}: {e.strerror or e}") from None


def figures(df: pd.DataFrame) -> list[tuple[str, object]]:
    """(file name, matplotlib figure) for every question the frame can answer."""
    import matplotlib  # lazy: matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: matplotlib

    figs: list[tuple[str, object]] = []
    has_base = df["speedup"].notna()
    for method, g in df[(df["method"] != BASELINE) & has_base].groupby("method", sort=False):
        for axis, alike in _axes(g).items():
            name = axis.removeprefix("param.")
            fig = _speedup_vs(plt, g, method, axis, alike)
            figs.append((f"speedup_{_safe(method)}_{_safe(name)}.png", fig))
        if "param.depth" in g and g["param.depth"].notna().any():
            for metric in ("acceptance_rate", "tokens_per_iteration"):
                short = "acceptance" if metric == "acceptance_rate" else metric
                figs.append(
                    (
                        f"{short}_{_safe(method)}_depth.png",
                        _metric_vs_depth(plt, g, method, metric),
                    )
                )
    try:
        best = compare(df)
    except QueryError:
        best = None
    if best is not None and not best.empty:
        figs.append(("speedup_by_method.png", _bars(plt, best)))
    if not figs:
        raise QueryError(
            "nothing to plot: no trial has an autoregressive baseline with the "
            "same pair, dataset, sampling and max_new_tokens"
        )
    return figs


def _axes(g: pd.DataFrame) -> dict[str, list[str]]:
    """Numeric columns that vary, each question once: axis -> the axes that move in lockstep
    with it (DynaTree's D_max = D0 + 3), which get no figure of their own."""
    cols = [c for c in g.columns if c.startswith("param.")] + ["max_new_tokens", "temperature"]
    kept: dict[str, list[str]] = {}
    for c in cols:
        values = g[c].dropna()
        # numbers only: a list-valued parameter or an on/off switch (an ablation) is no axis
        if values.empty or not values.map(_is_number).all() or values.nunique() < 2:
            continue
        same = next((k for k in kept if _lockstep(g, c, k)), None)
        if same is None:
            kept[c] = []
        else:
            kept[same].append(c)
    return kept


def _is_number(v) -> bool:
    return isinstance(v, numbers.Number) and not isinstance(v, (bool, np.bool_))


def _lockstep(g: pd.DataFrame, a: str, b: str) -> bool:
    """Each value of `a` comes with one value of `b` and the other way round."""
    pairs = g[[a, b]].drop_duplicates()
    return bool(pairs[a].is_unique and pairs[b].is_unique)


def _label(axis: str) -> str:
    name = axis.removeprefix("param.")
    unit = UNITS.get(name, "")
    return f"{name} ({unit})" if unit else name


def _panels(plt, pairs: list[str], title: str):
    """One panel per pair, side by side, sharing the y axis."""
    fig, axs = plt.subplots(
        1, len(pairs), figsize=(4.5 * len(pairs) + 1, 4), sharey=True, squeeze=False
    )
    fig.suptitle(title)
    return fig, dict(zip(pairs, axs[0]))


def _speedup_vs(plt, g: pd.DataFrame, method: str, axis: str, alike: list[str]):
    """Per config (the mean over repeats), then per axis value: the best and the range."""
    keys = list(dict.fromkeys([*CONFIG_KEY, axis, "pair"]))  # the axis may be a setting
    per_config = g.groupby(keys, dropna=False)["speedup"].mean().reset_index()
    pairs = list(dict.fromkeys(per_config["pair"]))
    title = f"{method}: speedup vs {axis.removeprefix('param.')}"
    if alike:
        title += f" ({', '.join(a.removeprefix('param.') for a in alike)} along with it)"
    fig, panels = _panels(plt, pairs, title)
    for pair, ax in panels.items():
        p = per_config[per_config["pair"] == pair]
        stats = p.groupby(axis)["speedup"].agg(["min", "max"]).sort_index()
        x = pd.to_numeric(stats.index).to_numpy(dtype=float)
        band = len(p) > len(stats)  # other axes vary too: their range as a band
        if band:
            ax.fill_between(x, stats["min"], stats["max"], alpha=0.2, label="range of configs")
        ax.plot(x, stats["max"], marker="o", label="best config" if band else "mean of repeats")
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_title(pair, fontsize=9)
        ax.set_xlabel(_label(axis))
        _ticks(ax, stats.index)
        ax.legend(fontsize=7)
    next(iter(panels.values())).set_ylabel(SPEEDUP)
    fig.tight_layout()
    return fig


def _metric_vs_depth(plt, g: pd.DataFrame, method: str, metric: str):
    label = {
        "acceptance_rate": ("acceptance rate", "acceptance rate (fraction of drafted tokens)"),
        "tokens_per_iteration": ("tokens per iteration", "tokens per iteration (tokens)"),
    }[metric]
    pairs = list(dict.fromkeys(g["pair"]))
    fig, panels = _panels(plt, pairs, f"{method}: {label[0]} vs depth (mean over configs)")
    for pair, ax in panels.items():
        m = g[g["pair"] == pair].groupby("param.depth")[metric].mean().sort_index()
        ax.plot(pd.to_numeric(m.index).to_numpy(dtype=float), m.values, marker="o")
        ax.set_title(pair, fontsize=9)
        ax.set_xlabel(_label("param.depth"))
        _ticks(ax, m.index)
    next(iter(panels.values())).set_ylabel(label[1])
    fig.tight_layout()
    return fig


def _bars(plt, best: pd.DataFrame):
    table = best.groupby(["method", "pair"], sort=False)["speedup"].max().unstack("pair")
    fig, ax = plt.subplots(figsize=(max(5, 1.4 * len(table) * max(1, table.shape[1])), 4))
    table.plot.bar(ax=ax, rot=30)
    for bars in ax.containers:  # one per pair; a method a pair lacks has no label
        labels = [f"{h:.2f}×" if h == h else "" for h in bars.datavalues]
        ax.bar_label(bars, labels=labels, fontsize=7, padding=2)
    ax.margins(y=0.15)  # room for the labels
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xlabel("method")
    ax.set_ylabel(f"best {SPEEDUP}")
    ax.set_title("best speedup per method and pair (best config, over settings)")
    ax.legend(fontsize=7, title="pair", title_fontsize=7)
    fig.tight_layout()
    return fig


def _ticks(ax, values) -> None:
    """Integer axes get integer ticks: the values themselves when few, else whole numbers."""
    from matplotlib.ticker import MaxNLocator  # lazy: matplotlib

    v = pd.to_numeric(pd.Series(list(values))).astype(float)
    if not (v == v.round()).all():
        return
    if len(v) <= MAX_TICKS:
        ax.set_xticks(sorted(v), [str(int(x)) for x in sorted(v)])
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _safe(name: str) -> str:
    return re.sub(r"[^\w.-]+", "_", name)
