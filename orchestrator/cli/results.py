"""`orch query | compare | export | plot | report`: thin commands over orchestrator.results
(the results frame, query, tables, output, plots, profiles) and its paper report.

Each reads one sweep: `--sweep NAME`, else the most recently updated one (`--all-sweeps`:
every trial in the database), and says which on its first line (stderr where stdout is data:
json, csv, export, plot paths)."""

from __future__ import annotations

import functools
import re
import sys
from pathlib import Path

import click

from engine.config import ENGINE_SPECS
from orchestrator.cli.options import (
    Finite,
    db_option,
    format_option,
    sweep_name,
    sweep_options,
    where_option,
)
from orchestrator.extras import require


def _frame(db_url, sweep, all_sweeps, details=False, per_prompt=False, certificates=None):
    """The frame of the chosen sweep and the line that says which (the caller prints it:
    _say_source)."""
    from orchestrator.results import describe_source, load_frame, resolve_sweep  # lazy: pandas
    from orchestrator.store import Store  # lazy: SQLAlchemy

    store = Store(db_url, mode="read")
    try:
        name = resolve_sweep(store, sweep, all_sweeps)
        df = load_frame(
            store,
            name,
            details=details,
            all_sweeps=name is None,
            per_prompt=per_prompt,
            certificates=certificates,
        )
        return df, describe_source(store, name, bool(sweep), len(df))
    finally:
        store.close()


def _say_source(source: str, fmt: str, ready: bool) -> None:
    """query's and compare's source line: on stdout before a table (or its error); for json and
    csv on stderr once the answer is `ready`, so that a bad --where is stderr's one line."""
    if (fmt == "table") != ready:
        click.echo(source, err=ready)


PREDICT_FLAGS = ("--predict-engine", "--predict-dtype", "--predict-host-ms")


def predict_on_option(what: str):
    return click.option(
        "--predict-on",
        default=None,
        metavar="DEVICE",
        help=f"a profiled device name (orch profile): {what}",
    )


def _check_predict_flags(predict_on, predict_with) -> None:
    """--predict-engine, --predict-dtype and --predict-host-ms need --predict-on."""
    given = (predict_with.engine, predict_with.dtype, predict_with.host_s)
    flag = next((f for f, v in zip(PREDICT_FLAGS, given) if v is not None), None)
    if flag and predict_on is None:
        raise click.UsageError(f"{flag} needs --predict-on")


def _curves(db_url, device: str | None) -> dict | None:
    """The forward-cost curves of --predict-on DEVICE, read before any result is (an unknown
    device: one error line naming the profiled ones); None without --predict-on."""
    if device is None:
        return None
    from orchestrator.results import device_curves  # lazy: pandas
    from orchestrator.store import Store  # lazy: SQLAlchemy

    store = Store(db_url, mode="read")
    try:
        return device_curves(store, device)
    finally:
        store.close()


def predict_options(when: str):
    """--predict-engine, --predict-dtype and --predict-host-ms, handed to the command as one
    `predict_with` (orchestrator.results.profiles.PredictWith); `when` prefixes their help."""

    def decorate(f):
        @click.option(
            "--predict-engine",
            type=click.Choice(ENGINE_SPECS),
            default=None,
            help=f"{when}that engine path's curves (default: each trial's own engine)",
        )
        @click.option(
            "--predict-dtype",
            type=click.Choice(["float32", "bfloat16", "float16"]),
            default=None,
            help=f"{when}that dtype's curves for both roles (default: each trial's own)",
        )
        @click.option(
            "--predict-host-ms",
            type=Finite(min=0),
            default=None,
            metavar="MS",
            help=f"{when}milliseconds outside model forwards per iteration, every method "
            "(default: each trial's own, measured where it ran)",
        )
        @functools.wraps(f)
        def wrapper(*args, predict_engine, predict_dtype, predict_host_ms, **kwargs):
            from orchestrator.results import PredictWith  # lazy: pandas

            host_s = None if predict_host_ms is None else predict_host_ms / 1000
            predict_with = PredictWith(predict_engine, predict_dtype, host_s)
            return f(*args, predict_with=predict_with, **kwargs)

        return wrapper

    return decorate


@click.command()
@click.option(
    "--best-by",
    required=True,
    metavar="METRIC",
    help="throughput, speedup, acceptance_rate, tokens_per_iteration, "
    "mean_accepted_length, ttft_s, tpot_s, total_s, peak_memory_bytes, ...",
)
@where_option
@sweep_options
@click.option(
    "--top",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
    help="rows to show per group (0: all)",
)
@click.option(
    "--global",
    "rank_global",
    is_flag=True,
    help="rank across every pair, dataset, sampling and device at once (default: within each)",
)
@click.option(
    "--columns",
    default=None,
    metavar="A,B,...",
    help="columns to show instead of the defaults, or '+A,B' to add to them: any metric "
    "(ttft_s, mean_accepted_length, ...), config (engine, max_new_tokens, pair, ...) or "
    "param (k, depth, params.k)",
)
@predict_on_option("the cost model's predicted_speedup and predicted_tpot_s there, to rank by")
@predict_options("with --predict-on: ")
@db_option
@format_option
def query(
    best_by, where, sweep, all_sweeps, top, rank_global, columns, predict_on, predict_with, db_url,
    fmt,
) -> None:  # fmt: skip
    """Configs ranked by a metric (mean over repeats) within each group of one pair, dataset
    slice, sampling setting and device (`rank` restarts at 1 in each); `*` marks the
    autoregressive baseline. Example: orch query --best-by speedup --where 'depth>=4'"""
    from orchestrator.results import (  # lazy: pandas
        BEST_BY,
        PREDICTED,
        QueryError,
        add_predictions,
        query_columns,
        render,
        render_query,
        varied_params,
    )
    from orchestrator.results import query as run  # lazy: pandas

    if best_by not in BEST_BY:  # before touching the database
        raise QueryError(
            f"metric {best_by!r} is not allowed for --best-by (allowed: {', '.join(BEST_BY)})"
        )
    if best_by in PREDICTED and predict_on is None:
        raise click.UsageError(f"--best-by {best_by} needs --predict-on")
    _check_predict_flags(predict_on, predict_with)
    curves = _curves(db_url, predict_on)
    certs = _mentions_certificate(where, columns)
    df, source = _frame(
        db_url,
        sweep,
        all_sweeps,
        details=curves is not None,
        per_prompt=True,
        certificates=certs or curves is not None,
    )
    _say_source(source, fmt, ready=False)
    if curves is not None:
        df = add_predictions(df, curves, predict_on, predict_with)
    ranked = run(
        df,
        best_by,
        where,
        top or None,
        by_group=not rank_global,
    )
    cols = query_columns(best_by, columns, ranked)
    if rank_global and "pair" not in cols:
        cols.insert(2, "pair")
    _say_source(source, fmt, ready=True)
    if fmt == "table":
        width = 100 if columns is None else 10_000  # columns asked for are shown whole
        click.echo(render_query(ranked, best_by, cols, varied_params(df), width=width))
        return
    keep = ["group", "pair", "target", "draft", "dataset", "temperature", "max_new_tokens"]
    keep = list(dict.fromkeys(cols[:2] + keep + cols[2:] + ["baseline"]))
    click.echo(render(ranked[keep].rename(columns=_export_name), fmt))


def _mentions_certificate(where: tuple[str, ...], columns: str | None) -> bool:
    """Whether --where or --columns name a certificate column
    (orchestrator/results/certificates.py), which needs the trials' per-prompt data."""
    from orchestrator.results.certificates import COLUMNS  # lazy: torch (engine.certify)

    names = re.findall(r"[\w.]+", " ".join([*where, columns or ""]))
    return any(n in COLUMNS for n in names)


def _export_name(col: str) -> str:
    return "params." + col.removeprefix("param.") if col.startswith("param.") else col


@click.command()
@where_option
@sweep_options
@predict_on_option("the cost model's predicted speedup there")
@predict_options("with --predict-on: ")
@db_option
@format_option
def compare(where, sweep, all_sweeps, predict_on, predict_with, db_url, fmt) -> None:
    """Each method's best config per pair and setting, Spec-Bench style: its speedup over
    autoregressive decoding with the same pair and settings, the spread over prompts and
    repeats, tau (tokens per iteration) and acceptance, its parameters, and the speedup per
    task where the dataset has several (spec_bench: its 6). With --predict-on, the speedup the
    cost model predicts on that device beside it (alone unless every trial ran on that
    device)."""
    _check_predict_flags(predict_on, predict_with)
    from orchestrator.results import (  # lazy: pandas
        add_predictions,
        apply_where,
        compare_predicted,
        render,
        render_compare,
        varied_params,
    )
    from orchestrator.results import compare as run  # lazy: pandas

    curves = _curves(db_url, predict_on)
    df, source = _frame(db_url, sweep, all_sweeps, details=curves is not None, per_prompt=True)
    _say_source(source, fmt, ready=False)
    if curves is None:
        best = run(df, where)
    else:
        df = add_predictions(df, curves, predict_on, predict_with)
        best = compare_predicted(df, where, predict_on)
    _say_source(source, fmt, ready=True)
    if fmt == "table":
        click.echo(render_compare(best, varied_params(apply_where(df, where))))
    else:
        click.echo(render(best, fmt))


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
@sweep_options
@db_option
def export(fmt, output, details, where, sweep, all_sweeps, db_url) -> None:
    """One row per finished trial: resolved config (method parameters as params.<name>),
    placement, every metric; README "Export columns" lists them."""
    from orchestrator.results import (  # lazy: pandas
        apply_where,
        check_output_file,
        export_frame,
        write_export,
    )

    if fmt == "parquet":
        require("pyarrow", "orch export --format parquet")
    if output:
        check_output_file(output)  # before the database is read
    df, source = _frame(
        db_url, sweep, all_sweeps, details=details, per_prompt=True, certificates=details
    )
    df = export_frame(apply_where(df, where), details)
    click.echo(source, err=True)
    write_export(df, fmt, output, sys.stdout)
    if output:
        click.echo(f"wrote {len(df)} rows to {output}", err=True)


@click.command()
@click.option("-o", "--output", "out_dir", default="plots", show_default=True, metavar="DIR")
@where_option
@sweep_options
@db_option
def plot(out_dir, where, sweep, all_sweeps, db_url) -> None:
    """PNG figures: speedup against each grid axis, acceptance against depth, best speedup
    per method and pair."""
    require("matplotlib", "orch plot")  # before anything is read or written
    from orchestrator.results import apply_where, check_output_dir, make_plots  # lazy: pandas

    check_output_dir(out_dir)  # before the database is read
    df, source = _frame(db_url, sweep, all_sweeps)
    paths = make_plots(apply_where(df, where), out_dir)
    click.echo(source, err=True)
    for path in paths:
        click.echo(str(path))


@click.command()
@sweep_name()
@click.option(
    "-o",
    "--output",
    "out_dir",
    default=None,
    metavar="DIR",
    help="folder for report.md, report.html and img/*.png (default: report-<sweep>/); with "
    "--claims, for claims.md (default: report-claims/)",
)
@click.option(
    "--claims",
    "claims_file",
    default=None,
    metavar="FILE",
    help="instead of one sweep: the claims table of a claims file (examples/claims.yaml), each "
    "claim decided from its sweep's trials",
)
@click.option(
    "--into",
    "into_file",
    default=None,
    metavar="DOC",
    help="with --claims: write the table into DOC between its <!-- claims:begin --> and "
    "<!-- claims:end --> lines instead (docs/reproduction.md)",
)
@predict_options("the predictions on each profiled GPU: ")
@db_option
def report(sweep, out_dir, claims_file, into_file, predict_with, db_url) -> None:
    """A paper-style report of one sweep (default: the most recent) from the database alone:
    Markdown and HTML with PNG figures: the sweep file's paper reference and scale, every
    config's speedup and tokens per iteration with their 95% intervals, the papers'
    acceptance definitions, certificate and machine, the tables and figures the sweep's grid
    calls for, and the cost model's predicted speedups on every profiled GPU
    (docs/report.md). With --claims FILE: the papers' claims table (claims.md), each claim's
    verdict, numbers, machines and trials."""
    if into_file is not None and claims_file is None:
        raise click.UsageError("--into needs --claims")
    if claims_file is not None:
        _claims_report(claims_file, sweep, out_dir, into_file, db_url)
        return
    require("matplotlib", "orch report")  # before anything is read or written
    from orchestrator.results import check_output_dir, resolve_sweep  # lazy: pandas
    from orchestrator.results.paper import write_report  # lazy: matplotlib, torch
    from orchestrator.store import Store  # lazy: SQLAlchemy

    store = Store(db_url, mode="read")
    try:
        name = resolve_sweep(store, sweep)
        out_dir = out_dir or f"report-{name}"
        check_output_dir(out_dir, "the report")  # before the results are read
        written = write_report(store, name, out_dir, predict_with)
    finally:
        store.close()
    click.echo(f"sweep {name!r}: wrote {len(written) - 2} figures and report.md, report.html")
    click.echo(f"to {out_dir}/")


def _claims_report(claims_file, sweep, out_dir, into_file, db_url) -> None:
    """`orch report --claims FILE`: the claims file checked, then every claim decided from the
    database, then DIR/claims.md written (or the table put into DOC's marked block)."""
    from orchestrator.results import QueryError, check_output_dir  # lazy: pandas
    from orchestrator.results.claims import (  # lazy: pandas
        claims_report,
        into_document,
        load_claims,
        read_document,
        render_claims,
    )
    from orchestrator.store import Store  # lazy: SQLAlchemy

    if sweep:
        raise click.UsageError("--claims reads the sweeps its claims name: give no SWEEP")
    if into_file is not None and out_dir is not None:
        raise click.UsageError("give -o DIR or --into DOC, not both")
    claims = load_claims(claims_file)
    out = Path(out_dir or "report-claims") if into_file is None else Path(into_file)
    if into_file is None:
        check_output_dir(out, "the claims table")
    else:
        doc = read_document(out)  # before the database is read
    store = Store(db_url, mode="read")
    try:
        text = render_claims(claims_report(store, claims))
    finally:
        store.close()
    target = out / "claims.md" if into_file is None else out
    try:
        if into_file is None:
            out.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        else:
            target.write_text(into_document(doc, text), encoding="utf-8")
    except OSError as e:
        raise QueryError(f"cannot write {target}: {e.strerror or e}") from None
    click.echo(f"{len(claims)} claims: wrote {target}")
