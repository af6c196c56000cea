"""`orch submit | resume | cancel | status | db upgrade`: thin commands over
orchestrator.run.runner, orchestrator.store and db.migrate."""

from __future__ import annotations

import sys

import click

from orchestrator.cli.options import Finite, db_option, format_option, sweep_name
from orchestrator.extras import require
from orchestrator.only import parse_only
from orchestrator.run import eta_s, format_eta


def _run_options(f):
    for opt in reversed(
        [
            click.option(
                "--executor",
                type=click.Choice(["ray", "local"]),
                default="ray",
                show_default=True,
                help="ray: trials in parallel, one worker per GPU (or CPU core); local: one "
                "at a time in this process, no Ray",
            ),
            click.option(
                "--address",
                default=None,
                metavar="ADDR",
                help="Ray cluster to connect to (auto: the one this machine is part of, "
                "HOST:PORT); with `orch submit`, http://HEAD:8265 runs the driver on the "
                "cluster's head through the Ray Jobs API. Default: start a local Ray",
            ),
            click.option(
                "--actors",
                type=click.IntRange(min=1),
                default=None,
                help="number of Ray actors (default: one per GPU, else per CPU)",
            ),
            click.option(
                "--accelerator",
                type=click.Choice(["auto", "gpu", "cpu"]),
                default="auto",
                show_default=True,
                help="Ray actors per GPU or per CPU (auto: GPU when the cluster has GPUs)",
            ),
            click.option("--retry-failed", is_flag=True, help="run failed trials again too"),
            click.option(
                "--lease-s",
                type=Finite(min=1.0),
                default=None,
                help="how long a trial stays claimed without this driver's heartbeat; other "
                "drivers take it over after that  [default: 60]",
            ),
            click.option(
                "--db-retry-s",
                type=Finite(min=0.0),
                default=None,
                help="how long to retry a lost database connection before stopping; the "
                "sweep stays resumable  [default: 300]",
            ),
            click.option(
                "--progress/--no-progress",
                default=None,
                help="progress bar on stderr (default: when stderr is a terminal)",
            ),
            click.option(
                "--only",
                multiple=True,
                metavar="KEY=V1[,V2...]",
                help="run only the trials whose KEY (method, a method parameter, temperature, "
                "top_p, draft_temperature, draft_top_p (none: the target's), dataset, target, "
                "draft, max_new_tokens, repeat) is one of the values; "
                "repeatable, a trial must match every --only. The others stay pending for a "
                "later resume or submit",
            ),
            click.option(
                "-v",
                "--verbose",
                is_flag=True,
                help="library warnings and logs (transformers, Ray) on the terminal too; "
                "they always go to the run log, ORCH_HOME/logs/SWEEP-TIME-PID.log",
            ),
        ]
    ):
        f = opt(f)
    return f


def _options(
    executor,
    address,
    actors,
    accelerator,
    retry_failed,
    lease_s,
    db_retry_s,
    progress,
    verbose,
    only,
):
    from orchestrator.run.runner import RunOptions  # lazy: SQLAlchemy (the store)

    timing = {"lease_s": lease_s, "db_retry_s": db_retry_s}
    return RunOptions(
        executor=executor,
        address=address,
        actors=actors,
        accelerator=accelerator,
        retry_failed=retry_failed,
        progress=progress,
        verbose=verbose,
        only=parse_only(only),
        **{k: v for k, v in timing.items() if v is not None},
    )


def _finish(run) -> None:
    from orchestrator.run.runner import Interrupted  # lazy: SQLAlchemy (the store)

    log = lambda line: click.echo(line, err=True)  # noqa: E731
    try:
        s = run(log)
    except Interrupted as e:
        click.echo(str(e), err=True)
        sys.exit(130)
    click.echo(
        f"sweep {s.sweep!r}: {s.total} trials; ran {s.ran} ({s.done} done, {s.failed} "
        f"failed, {s.retried} retried) in {s.wall_s:.1f}s; status {s.status}"
        + (f"; {s.pending} trials still pending (`orch resume {s.sweep}`)" if s.pending else "")
    )
    if s.failed:
        click.echo(
            f"error: {s.failed} of {s.ran} trials failed; `orch status {s.sweep}` shows "
            f"their errors, `orch resume {s.sweep} --retry-failed` runs them again",
            err=True,
        )
        sys.exit(1)


@click.command()
@click.argument("sweep_file", type=click.Path(dir_okay=False))
@db_option
@_run_options
@click.option(
    "--replace",
    is_flag=True,
    help="a sweep is its name: resubmitting an edited file is refused unless --replace, which "
    "makes this file's trials the sweep's (unchanged trials keep their results)",
)
@click.option(
    "--rerun",
    is_flag=True,
    help="measure the sweep's done trials again; each new result replaces the old one",
)
@click.option(
    "--scale",
    is_flag=True,
    help="run the file's scale: block (its grid at smaller sizes, for a CPU) as sweep "
    "NAME-scaled; default: the file's own sizes",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="check the file and say what would run: trials per method, how many are done, the "
    "time past trials of the same configs took; nothing is written",
)
def submit(sweep_file, db_url, replace, rerun, scale, dry_run, **kw) -> None:
    """Validate SWEEP_FILE, store its trials, run those not done yet. Several drivers may
    run one sweep, or sweeps sharing configs, at once: they split the trials.

    \b
    Which executor:
    - `ray` (default): trials in parallel, one worker per GPU, or per CPU core without GPUs,
      on a local Ray or the cluster at --address. For GPUs, clusters, and many trials on a
      multi-core CPU (each worker gets its share of the cores).
    - `local`: one trial at a time in this process, with every CPU core (one thread for the
      built-in tiny models). For a quick check, one GPU, debugging, or where Ray is not
      installed; no Ray start-up."""
    from orchestrator.run.jobs import is_jobs_address, submit_job  # lazy: SQLAlchemy (spec)

    if dry_run:
        from orchestrator.results import render  # lazy: pandas
        from orchestrator.run.dry_run import dry_run as plan  # lazy: SQLAlchemy

        rows, line = plan(sweep_file, db_url, _options(**kw), scaled=scale, rerun=rerun)
        import pandas as pd  # lazy: pandas

        click.echo(render(pd.DataFrame(rows).drop(columns="est_s"), "table"))
        click.echo(line)
        return
    if is_jobs_address(kw["address"]):
        require("ray", "--address http://... (the Ray Jobs API)")

        opts = {k: v for k, v in kw.items() if k not in ("address", "progress")}
        opts.update(replace=replace, rerun=rerun, scale=scale)
        sys.exit(
            submit_job(
                sweep_file, kw["address"], db_url, opts, log=lambda line: click.echo(line, err=True)
            )
        )
    from orchestrator.run.runner import submit as run  # lazy: SQLAlchemy (the store)
    from orchestrator.spec import announce  # lazy: SQLAlchemy (db.models)

    _finish(
        lambda log: run(
            sweep_file,
            db_url,
            _options(**kw),
            announce(log, sweep_file, scale),
            replace=replace,
            rerun=rerun,
            scaled=scale,
        )
    )


@click.command()
@sweep_name()
@db_option
@_run_options
def resume(sweep, db_url, **kw) -> None:
    """Run the unfinished trials of SWEEP (default: the most recent sweep), beside any
    driver still running it; trials of a killed driver are taken over once its lease runs
    out (at once on the same host)."""
    from orchestrator.run.runner import resume as run  # lazy: SQLAlchemy (the store)

    _finish(lambda log: run(sweep, db_url, _options(**kw), log=log))


@click.command()
@sweep_name(required=True)
@db_option
def cancel(sweep, db_url) -> None:
    """Cancel SWEEP: its pending trials are cancelled (those another sweep still needs stay
    pending); its drivers stop after their trials in flight. `orch resume SWEEP` runs them
    later. A finished sweep is left as it is (exit 0)."""
    from orchestrator.store import Store  # lazy: SQLAlchemy

    store = Store(db_url, mode="write")
    try:
        c = store.cancel(sweep)
    finally:
        store.close()
    if c.finished:
        click.echo(f"sweep {sweep!r} is finished: nothing to cancel")
        return
    shared = f" ({c.shared} shared with other sweeps left pending)" if c.shared else ""
    click.echo(f"cancelled sweep {sweep!r}: {c.cancelled} pending trials cancelled{shared}")


@click.command()
@sweep_name()
@db_option
@format_option
def status(sweep, db_url, fmt) -> None:
    """Progress per sweep, with the time a running sweep has left (eta: its latest trials'
    rate, workers included); with SWEEP also its running and failed trials and its profile
    trials (a sweep's `profile:` block) with the device each one measured."""
    import pandas as pd  # lazy: pandas

    from db.models import SweepStatus, TrialStatus  # lazy: SQLAlchemy
    from orchestrator.results import progress_line, render, status_frame  # lazy: pandas
    from orchestrator.store import Store  # lazy: SQLAlchemy

    store = Store(db_url, mode="read")
    frame = status_frame(store, sweep)
    cuts = {r.sweep: store.cut(store.sweep(r.sweep)["id"]) for r in frame.itertuples()}
    etas = [  # a run with --only takes only its cut's trials: those are what is left
        eta_s(
            store.finish_times(r.sweep),
            cuts[r.sweep][1] if cuts[r.sweep] else r.pending + r.running,
        )
        if r.status == SweepStatus.RUNNING
        else None
        for r in frame.itertuples()
    ]
    if fmt == "table":
        frame.insert(frame.columns.get_loc("driver"), "eta", [format_eta(e) for e in etas])
    else:
        frame["eta_s"] = [None if e is None else round(e, 1) for e in etas]
    click.echo(render(frame, fmt))
    if sweep and fmt == "table":
        click.echo("")
        click.echo(progress_line(sweep, (store.counts(sweep) or [{}])[0]))
        if cuts.get(sweep):
            only, left = cuts[sweep]
            shown = " ".join(f"--only {o.shown()}" for o in only)
            click.echo(f"its latest run took a cut ({shown}): {left} of its trials left")
        sweep_id = store.sweep(sweep)["id"]
        rows = store.trials(sweep_id, (TrialStatus.RUNNING, TrialStatus.FAILED))
        if rows:
            click.echo("")
            click.echo(render(pd.DataFrame(rows), fmt))
        profiles = store.profile_trials(sweep_id)
        if profiles:
            click.echo("")
            click.echo(render(pd.DataFrame(profiles), fmt))


@click.group()
def db() -> None:
    """Database schema (Alembic migrations)."""


@db.command("upgrade")
@db_option
@click.option("--revision", default="head", show_default=True)
def db_upgrade(db_url, revision) -> None:
    """Create or upgrade the schema."""
    from db import DatabaseError, create_db_engine, redact, resolve_url, upgrade  # lazy: SQLAlchemy
    from orchestrator.store import StoreError  # lazy: SQLAlchemy

    try:
        url = resolve_url(db_url)
        engine = create_db_engine(url, writable=True)
        rev = upgrade(engine, revision)
    except DatabaseError as e:
        raise StoreError(str(e)) from None
    click.echo(f"{redact(url)} is at revision {rev}")


@db.command("current")
@db_option
def db_current(db_url) -> None:
    """Print the schema revision of the database and the one this code needs."""
    from db import (  # lazy: SQLAlchemy
        DatabaseError,
        create_db_engine,
        current_revision,
        head_revision,
    )
    from orchestrator.store import StoreError  # lazy: SQLAlchemy

    try:
        rev = current_revision(create_db_engine(db_url, must_exist=True))
    except DatabaseError as e:
        raise StoreError(str(e)) from None
    click.echo(f"current {rev or '(empty)'}; head {head_revision()}")
