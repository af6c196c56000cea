"""`orch submit | resume | cancel | status | db upgrade`: thin commands over orchestrator.runner,
orchestrator.store and db.migrate."""

from __future__ import annotations

import sys

import click

from orchestrator.cli_options import db_option, format_option


def _run_options(f):
    for opt in reversed(
        [
            click.option(
                "--executor",
                type=click.Choice(["ray", "local"]),
                default="ray",
                show_default=True,
                help="ray: one actor per GPU (or CPU slot); local: in this process",
            ),
            click.option(
                "--address",
                default=None,
                metavar="ADDR",
                help="Ray cluster to connect to (e.g. auto); default: start a local Ray",
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
                "--force", is_flag=True, help="take over a sweep whose driver still looks alive"
            ),
            click.option(
                "--progress/--no-progress",
                default=None,
                help="progress bar on stderr (default: when stderr is a terminal)",
            ),
        ]
    ):
        f = opt(f)
    return f


def _options(executor, address, actors, accelerator, retry_failed, force, progress):
    from orchestrator.runner import RunOptions

    return RunOptions(
        executor=executor,
        address=address,
        actors=actors,
        accelerator=accelerator,
        retry_failed=retry_failed,
        force=force,
        progress=progress,
    )


def _finish(run) -> None:
    from orchestrator.runner import Interrupted

    log = lambda line: click.echo(line, err=True)  # noqa: E731
    try:
        s = run(log)
    except Interrupted as e:
        click.echo(str(e), err=True)
        sys.exit(130)
    click.echo(
        f"sweep {s.sweep!r}: {s.total} trials; ran {s.ran} ({s.done} done, {s.failed} "
        f"failed, {s.retried} retried) in {s.wall_s:.1f}s; status {s.status}"
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
def submit(sweep_file, db_url, **kw) -> None:
    """Validate SWEEP_FILE, store its trials, run those not done yet."""
    from orchestrator.runner import submit as run

    _finish(lambda log: run(sweep_file, db_url, _options(**kw), log=log))


@click.command()
@click.argument("sweep", required=False)
@db_option
@_run_options
def resume(sweep, db_url, **kw) -> None:
    """Run the unfinished trials of SWEEP (default: the most recent sweep)."""
    from orchestrator.runner import resume as run

    _finish(lambda log: run(sweep, db_url, _options(**kw), log=log))


@click.command()
@click.argument("sweep")
@db_option
def cancel(sweep, db_url) -> None:
    """Cancel SWEEP: pending trials are cancelled; a running driver stops after its trials
    in flight. `orch resume SWEEP` runs them later."""
    from orchestrator.store import Store

    n = Store(db_url, mode="write").cancel(sweep)
    click.echo(f"cancelled sweep {sweep!r}: {n} pending trials cancelled")


@click.command()
@click.argument("sweep", required=False)
@db_option
@format_option
def status(sweep, db_url, fmt) -> None:
    """Progress per sweep; with SWEEP also its running and failed trials."""
    from db.models import TrialStatus
    from orchestrator.report import render, status_frame
    from orchestrator.store import Store

    store = Store(db_url, mode="read")
    click.echo(render(status_frame(store, sweep), fmt))
    if sweep and fmt == "table":
        import pandas as pd

        rows = store.trials(store.sweep(sweep)["id"], (TrialStatus.RUNNING, TrialStatus.FAILED))
        if rows:
            click.echo("")
            click.echo(render(pd.DataFrame(rows), fmt))


@click.group()
def db() -> None:
    """Database schema (Alembic migrations)."""


@db.command("upgrade")
@db_option
@click.option("--revision", default="head", show_default=True)
def db_upgrade(db_url, revision) -> None:
    """Create or upgrade the schema."""
    from db import DatabaseError, create_db_engine, redact, resolve_url, upgrade
    from orchestrator.store import StoreError

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
    from db import DatabaseError, create_db_engine, current_revision, head_revision
    from orchestrator.store import StoreError

    try:
        rev = current_revision(create_db_engine(db_url, must_exist=True))
    except DatabaseError as e:
        raise StoreError(str(e)) from None
    click.echo(f"current {rev or '(empty)'}; head {head_revision()}")
