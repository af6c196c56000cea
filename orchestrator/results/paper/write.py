"""`write_report`: the sections of `orch report` (header.py, configs.py, figures.py, axes.py)
computed from the database, then written as report.md, report.html (doc.py) and img/*.png."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib
import pandas as pd

from orchestrator.results.frame import QueryError, load_frame, resolve_sweep
from orchestrator.results.paper.axes import axes
from orchestrator.results.paper.budget import budget
from orchestrator.results.paper.configs import configs, main_tables, method_order
from orchestrator.results.paper.doc import Block, to_html, to_markdown
from orchestrator.results.paper.figures import dynatree, histogram, temperature, verifiers
from orchestrator.results.paper.header import distribution_checks, failures, header, predictions
from orchestrator.results.profiles import TRIALS_OWN, PredictWith
from orchestrator.store import Store


def write_report(
    store: Store, sweep: str | None, out_dir: str | Path, predict_with: PredictWith = TRIALS_OWN
) -> list[Path]:
    """Read sweep `sweep` (None: the most recent), then write report.md, report.html and the
    figures into `out_dir`; everything is computed before the first file is written.
    `predict_with`: what the predictions on profiled GPUs take instead of each trial's own
    engine, dtype and host time (orchestrator/results/profiles.py)."""
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: matplotlib (pyplot, once Agg is chosen)

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


def figure_sections(cf: pd.DataFrame) -> tuple[list[Block], list[tuple[str, Any]]]:
    """The data-driven sections (figures.py, axes.py) in the report's order: each one's blocks
    and PNG figures, where the sweep varies what it is about."""
    blocks: list[Block] = []
    figs: list[tuple[str, Any]] = []
    for section in (verifiers, dynatree, temperature, budget, axes, histogram):
        b, f = section(cf)
        blocks += b
        figs += f
    return blocks, figs
