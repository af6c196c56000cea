"""`orch report`'s node-budget section (write.py figure_sections): speedup and tokens per
iteration against each method's node budget (its record's `budget` parameter, or the node count
of a shape budget such as SpecInfer's expansion), where a method's budget varies."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import pandas as pd

from engine.config import parse_config
from engine.drafters import DRAFTERS
from orchestrator.results.paper.cells import params_cell, val
from orchestrator.results.paper.configs import varied_by_method
from orchestrator.results.paper.doc import Block
from orchestrator.results.paper.figures import best_line, groups, titled
from orchestrator.results.settings import BASELINE


def budget_param(method: str) -> str:
    """The method's budget parameter (engine/drafters/record.py `budget`; "budget" for a
    method the registry does not know)."""
    d = DRAFTERS.get(method)
    return d.budget if d is not None and d.budget is not None else "budget"


def by_shape(method: str) -> bool:
    """Whether the method's budget is a shape whose node count is the budget (SpecInfer's
    expansion widths <k_1, .., k_m>, Sec. 3.1) rather than a number."""
    d = DRAFTERS.get(method)
    return d is not None and d.budget is not None and not _numeric(d.config, d.budget)


def _numeric(config: type, name: str) -> bool:
    default = next(f.default for f in dataclasses.fields(config) if f.name == name)
    return isinstance(default, (int, float)) and not isinstance(default, bool)


def budget_of(method: str, params: dict[str, Any]) -> float | None:
    """A config's node budget: its budget parameter, or, where that is a shape, the node count
    the shape gives (the record's `nodes` of the config)."""
    if by_shape(method):
        d = DRAFTERS[method]
        hints = typing.get_type_hints(d.config)
        # a frame's parameter column holds 4.0 for an int where other methods leave it NaN
        given = {
            k: int(v) if hints[k] is int and isinstance(v, float) and v.is_integer() else v
            for k, v in params.items()
            if k in hints
        }
        return float(d.nodes(parse_config(d.config, given)))
    v = params.get(budget_param(method))
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def budget(cf: pd.DataFrame) -> tuple[list[Block], list]:
    import matplotlib.pyplot as plt  # lazy: matplotlib (pyplot, once Agg is chosen)

    c = cf.assign(_budget=cf.apply(lambda r: budget_of(r["method"], r["params"]), axis=1))
    c = c[c["_budget"].notna() & (c["method"] != BASELINE)]
    varies = c.groupby("method")["_budget"].nunique()
    c = c[c["method"].map(varies) > 1]
    if c.empty:
        return [], []
    out: list[Block] = [
        ("h2", "Against node budget"),
        (
            "p",
            "Node budget: each method's own parameter ("
            + ", ".join(
                f"{m}: {budget_param(m)}" for m in sorted(set(c["method"])) if not by_shape(m)
            )
            + "".join(
                f"; {m}: nodes of its {budget_param(m)}"
                for m in sorted(set(c["method"]))
                if by_shape(m)
            )
            + "); one line per method and its other varied parameters, mean over repeats, "
            "with its 95% bootstrap interval.",
        ),
    ]
    figs = []
    for i, (label, g) in enumerate(groups(c, [])):
        varied = varied_by_method(g)

        def line(r) -> str:
            names = [k for k in varied[r["method"]] if k != budget_param(r["method"])]
            return r["method"] + (f" {params_cell(r['params'], names)}" if names else "")

        g = g.assign(_line=g.apply(line, axis=1))
        panels = [m for m in ("speedup", "tokens_per_iteration") if g[m].notna().any()]
        fig, axs = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
        for ax, metric in zip(axs[0], panels):
            for ln in sorted(set(g["_line"])):
                best_line(ax, g[g["_line"] == ln], "_budget", metric, ln)
            ax.set_xscale("log", base=2)
            ticks = sorted(set(g["_budget"]))
            ax.set_xticks(ticks, [val(t) for t in ticks])
            ax.minorticks_off()
            ax.set_xlabel("node budget (drafted nodes)")
            ax.set_ylabel(
                "speedup over autoregressive (x)"
                if metric == "speedup"
                else "tokens per iteration (tokens)"
            )
        axs[0][0].legend(fontsize=7)
        fig.suptitle(titled("against node budget", label), fontsize=9)
        fig.tight_layout()
        name = f"budget_{i + 1:02d}.png"
        figs.append((name, fig))
        out.append(
            (
                "img",
                f"img/{name}",
                titled("Speedup and tokens per iteration against node budget", label),
            )
        )
    return out, figs
