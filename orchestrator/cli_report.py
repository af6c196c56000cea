"""`orch query | compare | export | plot`: thin commands over orchestrator.report and plots."""

from __future__ import annotations

import sys

import click

from orchestrator.cli_options import db_option, format_option, sweep_option, where_option


def _frame(db_url, sweep, details=False):
    from orchestrator.report import load_frame
    from orchestrator.store import Store

    return load_frame(Store(db_url, mode="read"), sweep, details=details)


@click.command()
@click.option(
    "--best-by",
    required=True,
    metavar="METRIC",
    help="throughput, speedup, acceptance_rate, tokens_per_iteration, "
    "mean_accepted_length, ttft_s, tpot_s, total_s, peak_memory_bytes, ...",
)
@where_option
@sweep_option
@click.option(
    "--top", type=click.IntRange(min=0), default=20, show_default=True, help="rows to show (0: all)"
)
@db_option
@format_option
def query(best_by, where, sweep, top, db_url, fmt) -> None:
    """Configs ranked by a metric (mean over repeats), grouped by method and config."""
    from orchestrator.report import BEST_BY, QueryError, render
    from orchestrator.report import query as run

    if best_by not in BEST_BY:  # before touching the database
        raise QueryError(
            f"metric {best_by!r} is not allowed for --best-by (allowed: {', '.join(BEST_BY)})"
        )
    click.echo(render(run(_frame(db_url, sweep), best_by, where, top or None), fmt))


@click.command()
@where_option
@sweep_option
@click.option(
    "--predict-on",
    "predict_on",
    default=None,
    metavar="DEVICE",
    help="a profiled device name (orch profile): the cost model's predicted speedup there",
)
@db_option
@format_option
def compare(where, sweep, predict_on, db_url, fmt) -> None:
    """Methods x pairs: speedup of each method's best config over autoregressive decoding
    with the same pair, dataset and settings; with --predict-on, the speedup the cost model
    predicts on that device beside it (alone when no trial ran on that kind of device)."""
    from orchestrator.report import compare as run
    from orchestrator.report import compare_table, render

    if predict_on is None:
        best = run(_frame(db_url, sweep), where)
    else:
        from orchestrator.profiles import compare_predicted
        from orchestrator.store import Store

        best = compare_predicted(Store(db_url, mode="read"), sweep, where, predict_on)
    click.echo(render(compare_table(best) if fmt == "table" else best, fmt))


@click.command()
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["csv", "json", "parquet"]),
    default="csv",
    show_default=True,
)
@click.option("-o", "--output", default=None, metavar="FILE", help="default: stdout")
@click.option("--details", is_flag=True, help="include per-prompt and per-iteration JSON")
@where_option
@sweep_option
@db_option
def export(fmt, output, details, where, sweep, db_url) -> None:
    """One row per finished trial: resolved config, placement, every metric."""
    from orchestrator.report import apply_where, check_output_file, export_frame, write_export

    if fmt == "parquet":
        from orchestrator.extras import require

        require("pyarrow", "orch export --format parquet")
    if output:
        check_output_file(output)  # before the database is read
    df = export_frame(apply_where(_frame(db_url, sweep, details=details), where))
    write_export(df, fmt, output, sys.stdout)
    if output:
        click.echo(f"wrote {len(df)} rows to {output}", err=True)


@click.command()
@click.option("-o", "--output", "out_dir", default="plots", show_default=True, metavar="DIR")
@where_option
@sweep_option
@db_option
def plot(out_dir, where, sweep, db_url) -> None:
    """PNG figures: speedup against each grid axis, acceptance against depth, best speedup
    per method and pair."""
    from orchestrator.extras import require

    require("matplotlib", "orch plot")  # before anything is read or written
    from orchestrator.plots import make_plots
    from orchestrator.report import apply_where, check_output_dir

    check_output_dir(out_dir)  # before the database is read
    for path in make_plots(apply_where(_frame(db_url, sweep), where), out_dir):
        click.echo(str(path))
