"""Options shared by the database commands of `orch`."""

from __future__ import annotations

import functools
import math

import click

from engine.config import ConfigError


class Finite(click.FloatRange):
    """A float range that also refuses nan and inf (FloatRange lets nan through)."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value} is not a finite number", param, ctx)
        return number


def db_option(f):
    """`--db URL` and `--db-file PATH` (a file holding the URL, so that a password stays off
    the command line); the command receives `db_url`: the URL given, or None for the default
    (db.session.resolve_url: $ORCH_DB_URL, $ORCH_DB_URL_FILE, sqlite:///orch.db)."""

    @functools.wraps(f)
    def command(*args, db_url=None, db_file=None, **kwargs):
        return f(*args, db_url=url_from_options(db_url, db_file), **kwargs)

    command = click.option(
        "--db-file",
        "db_file",
        default=None,
        metavar="PATH",
        help="file holding the database URL: keeps a password out of `ps` "
        "(default: $ORCH_DB_URL_FILE)",
    )(command)
    return click.option(
        "--db",
        "db_url",
        default=None,
        metavar="URL",
        help="database URL (default: $ORCH_DB_URL, else $ORCH_DB_URL_FILE, else sqlite:///orch.db)",
    )(command)


def url_from_options(db_url: str | None, db_file: str | None) -> str | None:
    if db_url and db_file:
        raise ConfigError("give --db or --db-file, not both")
    if db_file is None:
        return db_url
    from db.session import DatabaseError, read_url_file  # lazy: SQLAlchemy
    from orchestrator.store import StoreError  # lazy: SQLAlchemy

    try:
        return read_url_file(db_file, "--db-file")
    except DatabaseError as e:
        raise StoreError(str(e)) from None


format_option = click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "csv"]),
    default="table",
    show_default=True,
    help="json: one JSON list of row objects",
)


def sweep_options(f):
    """`--sweep NAME` and `--all-sweeps`, as every report names them; the command receives
    `sweep` and `all_sweeps` (orchestrator.results.frame.resolve_sweep: the most recent by
    default)."""
    f = click.option(
        "--all-sweeps",
        is_flag=True,
        help="every trial in the database, whatever its sweep",
    )(f)
    return click.option(
        "--sweep",
        default=None,
        metavar="NAME",
        help="the sweep to read (default: the most recent one)",
    )(f)


where_option = click.option(
    "--where",
    multiple=True,
    metavar="COL OP VALUE",
    help="filter, repeatable: --where method=dynatree --where 'depth>=4' --where "
    "'target!=NAME' (quote comparisons: unquoted, the shell reads > as a redirection)",
)


def sweep_name(required: bool = False):
    """The sweep a run/status command acts on, as SWEEP or `--sweep NAME` (the reports' name
    for it); the command receives `sweep` (None: the most recent, where `required` is off)."""

    def decorate(f):
        @functools.wraps(f)
        def command(*args, sweep=None, sweep_option=None, **kwargs):
            if sweep and sweep_option and sweep != sweep_option:
                raise click.UsageError(f"two sweeps named: {sweep!r} and --sweep {sweep_option!r}")
            name = sweep or sweep_option
            if required and not name:
                raise click.UsageError("name the sweep: SWEEP or --sweep NAME")
            return f(*args, sweep=name, **kwargs)

        command = click.option(
            "--sweep", "sweep_option", default=None, metavar="NAME", help="same as SWEEP"
        )(command)
        return click.argument("sweep", required=False)(command)

    return decorate
