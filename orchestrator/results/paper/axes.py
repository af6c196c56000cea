"""`orch report`'s figures against every other numeric parameter a method varies (SALF's
threshold th, Sec. 4 and Fig. 3 of its paper; i.i.d. trees' K and L; ...): the parameters the
other sections (figures.py) do not already plot, i.e. not a node budget,
not a DynaTree tree axis and not the verifier. One figure per method and parameter, one line
per setting group, each point the best config over the method's other parameters."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from engine.drafters import DRAFTERS
from orchestrator.results.paper.budget import budget_param
from orchestrator.results.paper.cells import val, vkey
from orchestrator.results.paper.configs import varied_params
from orchestrator.results.paper.doc import Block
from orchestrator.results.paper.figures import best_line, drawing, groups
from orchestrator.results.settings import BASELINE

# plotted elsewhere: the depth x branch figure's axes (DynaTree's, under both their names)
# and the depth/branch bounds that follow them
COVERED = {"verifier", "D_max", "B_max"} | {
    n
    for m in drawing("depth_branch")
    for names in DRAFTERS[m].config.SWEEP_ALIASES.items()
    for n in names
}


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def parameter_axes(cf: pd.DataFrame) -> list[tuple[str, str]]:
    """(method, parameter) for every numeric parameter a method varies that no other section
    plots, in the sweep's method order."""
    out = []
    for method in dict.fromkeys(cf["method"]):
        if method == BASELINE:
            continue
        rows = cf[cf["method"] == method]["params"]
        skip = COVERED | {budget_param(method)}
        for name in varied_params(cf, method):
            if name not in skip and rows.map(lambda p: _number(p.get(name))).all():
                out.append((method, name))
    return out


def axes(cf: pd.DataFrame) -> tuple[list[Block], list[tuple[str, Any]]]:
    found = parameter_axes(cf)
    if not found:
        return [], []
    import matplotlib.pyplot as plt  # lazy: matplotlib (pyplot, once Agg is chosen)

    out: list[Block] = [
        ("h2", "Against each parameter"),
        (
            "p",
            "For each numeric parameter a method varies (and no section above plots): the "
            "best config over its other parameters at each value, one line per setting, with "
            "its 95% bootstrap interval.",
        ),
    ]
    figs = []
    for method, name in found:
        m = cf[cf["method"] == method]
        m = m.assign(_x=m["params"].map(lambda p: float(p[name])))
        panels = [c for c in ("speedup", "tokens_per_iteration") if m[c].notna().any()]
        fig, axs = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
        for ax, metric in zip(axs[0], panels):
            for label, g in groups(m, []):
                best_line(ax, g, "_x", metric, label or method)
            xs = sorted(set(m["_x"]), key=vkey)
            ax.set_xticks(xs, [val(x) for x in xs])
            ax.set_xlabel(name)
            ax.set_ylabel(
                "speedup over autoregressive (x)" if metric == "speedup" else "tokens per iteration"
            )
        axs[0][0].legend(fontsize=7)
        fig.suptitle(f"{method}: against {name}", fontsize=9)
        fig.tight_layout()
        file = re.sub(r"[^\w.-]+", "_", f"param_{method}_{name}") + ".png"
        figs.append((file, fig))
        out.append(
            ("img", f"img/{file}", f"{method}: speedup and tokens per iteration against {name}")
        )
    return out, figs
