"""The data-driven sections of `orch report` (write.py figure_sections): each one appears
only when the sweep varies what it is about, and returns its blocks and its PNG figures.

- per verifier (a setting with more than one verifier): Delayed Tree Expansion's Tables 2-3,
  block efficiency and tokens/s per verifier and sampling setting, each the best config over
  the other parameters (Sec. 4.2: "we select K and L that maximize ..."), and its Fig. 1, the
  depth-wise acceptance rate per verifier (engine/metrics.py delayed_acceptance_by_depth);
- DynaTree (depth x branch varying): heatmaps of speedup and tokens per iteration over depth x
  branch, one panel per threshold (DynaTree Sec. 4.6, Fig. 4);
- more than one target temperature: tokens per iteration and acceptance against temperature,
  the best config per method at each;
- a node budget varying within a method: speedup and tokens per iteration against it
  (budget.py);
- every other numeric parameter a method varies (axes.py);
- DDTree: the acceptance-length histogram per config (DDTree Sec. 5.4, Fig. 4).
Figures are one per setting group (the settings other than the figure's own axes).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from engine.drafters import DRAFTERS
from orchestrator.results.paper.cells import num, params_cell, setting_val, val, vkey
from orchestrator.results.paper.configs import LABELS, SETTING_COLS, varied_params
from orchestrator.results.paper.doc import Block, table
from orchestrator.results.settings import BASELINE

SAMPLING = ["temperature", "top_p", "draft_temperature", "draft_top_p"]
# each plotted metric's 95% bootstrap interval (results/intervals.py), drawn as error bars
INTERVAL = {"speedup": ("speedup_lo", "speedup_hi"), "tokens_per_iteration": ("tau_lo", "tau_hi")}


def best_line(ax: Any, rows: pd.DataFrame, x: str, metric: str, label: str) -> None:
    """Plot, at each value of column `x`, the config of `rows` with the highest `metric`, with
    that config's 95% interval as error bars (none where it has no interval)."""
    rows = rows[rows[metric].notna()]
    if rows.empty:
        return
    best = rows.loc[rows.groupby(x)[metric].idxmax()].sort_values(x)
    ys = best[metric].astype(float).to_numpy()
    lo_col, hi_col = INTERVAL[metric]
    lo = best[lo_col].astype(float).to_numpy() if lo_col in best else np.full(len(ys), np.nan)
    hi = best[hi_col].astype(float).to_numpy() if hi_col in best else np.full(len(ys), np.nan)
    err = np.nan_to_num(np.array([ys - lo, hi - ys]), nan=0.0).clip(min=0.0)
    ax.errorbar(best[x].to_numpy(), ys, yerr=err, marker="o", capsize=3, label=label)


def drawing(figure: str) -> list[str]:
    """The methods whose record asks for this paper figure (engine/drafters/record.py
    `figures`)."""
    return [m for m, d in DRAFTERS.items() if figure in d.figures]


def groups(cf: pd.DataFrame, inside: list[str]) -> list[tuple[str, pd.DataFrame]]:
    """The rows of `cf` split by every setting but `inside` and the machine, in value order,
    each with a label naming the settings that tell the groups apart. A figure pools machines:
    tokens per iteration does not depend on them, and each speedup it draws is its own
    config's, over its own machine's baseline (never a ratio across machines)."""
    by = [c for c in SETTING_COLS if c not in inside and c != "machine"]
    keys = [tuple(vkey(r[c]) for c in by) for r in cf[by].to_dict("records")]
    rows: dict[tuple, list[int]] = {}
    for i, k in enumerate(keys):
        rows.setdefault(k, []).append(i)
    out = [cf.iloc[rows[k]] for k in sorted(rows)]
    differ = [c for c in by if len(out) > 1 and cf.loc[:, c].map(val).nunique() > 1]
    return [
        (", ".join(f"{LABELS[c]} {setting_val(c, g.iloc[0][c])}" for c in differ), g) for g in out
    ]


def titled(what: str, label: str) -> str:
    return f"{what} ({label})" if label else what


def _verifier(r: pd.Series) -> str:
    return val(r["params"].get("verifier"))


def verifier_methods(cf: pd.DataFrame) -> list[str]:
    """The methods that run with more than one verifier at one setting (a verifier axis)."""
    drafted = cf[cf["method"] != BASELINE]
    if drafted.empty:
        return []
    per = drafted.assign(_v=drafted.apply(_verifier, axis=1))
    key = per[SETTING_COLS + ["method"]].apply(lambda r: json.dumps([val(v) for v in r]), axis=1)
    many = per.groupby(key)["_v"].nunique() > 1
    return sorted(set(per.loc[key.map(many), "method"]))


# ----------------------------------------------------------------------------- verifiers


def verifiers(cf: pd.DataFrame) -> tuple[list[Block], list]:
    methods = verifier_methods(cf)
    if not methods:
        return [], []
    import matplotlib.pyplot as plt  # lazy: matplotlib (pyplot, once Agg is chosen)

    drafted = cf[cf["method"].isin(methods)]
    drafted = drafted.assign(_row=drafted["method"] + " · " + drafted.apply(_verifier, axis=1))
    within = ["dataset", "category", *SAMPLING, "max_new_tokens"]
    out: list[Block] = [
        ("h2", "Verifiers"),
        (
            "p",
            "Per verifier and setting, the best config over the method's other parameters "
            "(Delayed Tree Expansion, Sec. 4.2, Tables 2-3); average: the mean over the "
            "settings shown.",
        ),
    ]
    for label, g in groups(drafted, within):
        cols = [c for c in within if g[c].map(val).nunique() > 1]
        setting = g[cols].apply(
            lambda r: " ".join(f"{LABELS[c]}={setting_val(c, r[c])}" for c in cols), axis=1
        )
        g = g.assign(_set=setting if cols else "all")
        order = sorted(
            set(g["_set"]), key=lambda s: [vkey(v) for v in g[g["_set"] == s].iloc[0][cols]]
        )
        for metric, name, digits in (
            ("tokens_per_iteration", "block efficiency (tokens/iter)", 3),
            ("throughput", "tokens/s", 2),
        ):
            best = g.groupby(["_row", "_set"])[metric].max().unstack("_set").reindex(columns=order)
            avg = best.mean(axis=1)
            rows = sorted(best.index, key=lambda r: (-avg[r], r))
            out += [
                ("h3", titled(name, label)),
                table(
                    ["method · verifier", *order, "average"],
                    [
                        (r, *[num(best.loc[r, s], digits) for s in order], num(avg[r], digits))
                        for r in rows
                    ],
                ),
            ]
    figs = []
    for i, (label, g) in enumerate(groups(drafted, [])):
        fig, ax = plt.subplots(figsize=(6, 4))
        drawn = False
        for row in sorted(set(g["_row"])):
            ok: dict[int, list[int]] = {}
            for depths in g[g["_row"] == row]["by_depth"]:
                for d, (acc, tried, _) in enumerate(depths or []):
                    ok.setdefault(d, [0, 0])
                    ok[d][0] += acc
                    ok[d][1] += tried
            xs = [d for d in sorted(ok) if ok[d][1]]
            if xs:
                ax.plot(xs, [ok[d][0] / ok[d][1] for d in xs], marker="o", label=row)
                drawn = True
        if not drawn:
            plt.close(fig)
            continue
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("depth of the verifier's node (root = 0)")
        ax.set_ylabel("acceptance rate (moved on to a child)")
        ax.set_title(titled("depth-wise acceptance", label), fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        name = f"acceptance_by_depth_{i + 1:02d}.png"
        figs.append((name, fig))
        out.append(
            (
                "img",
                f"img/{name}",
                titled(
                    "Depth-wise acceptance per verifier, pooled over configs "
                    "(Delayed Tree Expansion Sec. 5, Def. 5.1, Fig. 1)",
                    label,
                ),
            )
        )
    return out, figs


# ----------------------------------------------------------------------------- dynatree


def _axis(rows: pd.Series, names: tuple[str, str]) -> str | None:
    """The first of a DynaTree axis's names (sweep alias, paper name) that every row sets."""
    for n in names:
        if rows.map(lambda p: p.get(n) is not None).all():
            return n
    return None


def dynatree(cf: pd.DataFrame) -> tuple[list[Block], list]:
    import matplotlib.pyplot as plt  # lazy: matplotlib (pyplot, once Agg is chosen)

    d = cf[cf["method"].isin(drawing("depth_branch"))]
    if d.empty:
        return [], []
    # the paper's grid names and the config's: (depth, D0), (branch, B_mid), (threshold, tau)
    aliases = DRAFTERS[d["method"].iloc[0]].config.SWEEP_ALIASES.items()
    depth, branch, thr = (_axis(d["params"], names) for names in aliases)
    if depth is None or branch is None:
        return [], []
    values = lambda name: d["params"].map(lambda p: val(p.get(name))).nunique()  # noqa: E731
    if values(depth) < 2 and values(branch) < 2:
        return [], []
    out: list[Block] = [
        ("h2", "DynaTree: depth x branch"),
        (
            "p",
            f"Mean over repeats per cell; one panel per {thr or 'setting'} (DynaTree Sec. 4.6, "
            "Fig. 4). Where other parameters vary too, a cell shows the best of them.",
        ),
    ]
    figs = []
    for i, (label, g) in enumerate(groups(d, [])):
        get = lambda name: g["params"].map(lambda p: p.get(name))  # noqa: E731
        g = g.assign(_d=get(depth), _b=get(branch), _t=get(thr) if thr else 0.0)
        ds, bs = sorted(set(g["_d"]), key=vkey), sorted(set(g["_b"]), key=vkey)
        ts = sorted(set(g["_t"]), key=vkey)
        for metric, what in (
            ("speedup", "speedup (x)"),
            ("tokens_per_iteration", "tokens per iteration"),
        ):
            if g[metric].isna().all():
                continue
            cells = g.groupby(["_t", "_d", "_b"])[metric].max()
            lo, hi = float(cells.min()), float(cells.max())
            fig, axs = plt.subplots(
                1, len(ts), figsize=(3.2 * len(ts) + 1.5, 3.6), squeeze=False, layout="constrained"
            )
            for ax, t in zip(axs[0], ts):
                m = np.array([[cells.get((t, x, y), np.nan) for y in bs] for x in ds], dtype=float)
                im = ax.imshow(m, vmin=lo, vmax=hi, cmap="viridis", origin="lower", aspect="auto")
                for (r, c), v in np.ndenumerate(m):
                    if v == v:
                        ax.text(c, r, f"{v:.2f}", ha="center", va="center", fontsize=7, color="w")
                ax.set_xticks(range(len(bs)), [val(b) for b in bs])
                ax.set_yticks(range(len(ds)), [val(x) for x in ds])
                ax.set_xlabel(f"{branch} (children per node)")
                ax.set_ylabel(f"{depth} (tree levels)")
                ax.set_title(f"{thr} = {val(t)}" if thr else "", fontsize=9)
            fig.colorbar(im, ax=list(axs[0]), label=what)
            fig.suptitle(titled(f"dynatree {what}", label), fontsize=9)
            name = f"dynatree_{metric}_{i + 1:02d}.png"
            figs.append((name, fig))
            out.append(
                ("img", f"img/{name}", titled(f"DynaTree {what} over {depth} x {branch}", label))
            )
    return out, figs


# ----------------------------------------------------------------------------- temperature


def temperature(cf: pd.DataFrame) -> tuple[list[Block], list]:
    import matplotlib.pyplot as plt  # lazy: matplotlib (pyplot, once Agg is chosen)

    drafted = cf[(cf["method"] != BASELINE) & (cf["top_p"].map(lambda v: v in (None, 1.0)))]
    if drafted["temperature"].nunique() < 2:
        return [], []
    out: list[Block] = [
        ("h2", "Against temperature"),
        (
            "p",
            "At top-p 1: per method (and verifier where a setting has several) the best "
            "config by tokens per iteration at each target temperature, and the acceptance "
            "(accepted_per_drafted) of that config.",
        ),
    ]
    many = verifier_methods(cf)
    figs = []
    for i, (label, g) in enumerate(groups(drafted, SAMPLING)):
        lines = g.apply(
            lambda r: r["method"] + (f" · {_verifier(r)}" if r["method"] in many else ""), axis=1
        )
        g = g.assign(_line=lines)
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
        for line in sorted(set(g["_line"])):
            rows = g[g["_line"] == line]
            best = rows.loc[rows.groupby("temperature")["tokens_per_iteration"].idxmax()]
            best = best.sort_values("temperature")
            best_line(a1, best, "temperature", "tokens_per_iteration", line)
            acc = best["accepted_per_drafted"].astype(float)
            a2.plot(best["temperature"], acc, marker="o", label=line)
        a1.set_ylabel("tokens per iteration (tokens)")
        a2.set_ylabel("acceptance (accepted / drafted)")
        for ax in (a1, a2):
            ax.set_xlabel("target temperature")
        a1.legend(fontsize=7)
        fig.suptitle(titled("against temperature", label), fontsize=9)
        fig.tight_layout()
        name = f"temperature_{i + 1:02d}.png"
        figs.append((name, fig))
        out.append(
            (
                "img",
                f"img/{name}",
                titled("Tokens per iteration and acceptance against temperature", label),
            )
        )
    return out, figs


# ----------------------------------------------------------------------------- ddtree


def histogram(cf: pd.DataFrame) -> tuple[list[Block], list]:
    import matplotlib.pyplot as plt  # lazy: matplotlib (pyplot, once Agg is chosen)

    drawn = cf["method"].isin(drawing("acceptance_lengths"))
    d = cf[drawn & cf["hist"].map(lambda h: bool(h) and sum(h) > 0)]
    if d.empty:
        return [], []
    out: list[Block] = [
        ("h2", "DDTree acceptance lengths"),
        (
            "p",
            "Share of iterations per acceptance length (accepted + 1, the bonus included; "
            "DDTree Sec. 5.4, Fig. 4), pooled over prompts and repeats.",
        ),
    ]
    figs = []
    for i, (label, g) in enumerate(groups(d, [])):
        names = varied_params(g, g["method"].iloc[0])
        fig, ax = plt.subplots(figsize=(6, 4))
        for _, r in g.iterrows():
            h = np.array(r["hist"], dtype=float)
            tau = num(r["ddtree_mean_acceptance_length"], 2)
            ax.plot(
                range(1, len(h)),
                h[1:] / h.sum(),
                marker="o",
                label=f"{params_cell(r['params'], names)} (tau {tau})",
            )
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("acceptance length (tokens)")
        ax.set_ylabel("share of iterations")
        ax.legend(fontsize=7)
        ax.set_title(titled("DDTree acceptance-length histogram", label), fontsize=9)
        fig.tight_layout()
        name = f"ddtree_histogram_{i + 1:02d}.png"
        figs.append((name, fig))
        out.append(("img", f"img/{name}", titled("DDTree acceptance-length histogram", label)))
    return out, figs
