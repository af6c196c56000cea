"""`orch ui`: the read-only web dashboard over the database (orchestrator/ui/)."""

from __future__ import annotations

import click

from orchestrator.cli.options import db_option


@click.command()
@db_option
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="address to listen on (loopback by default; 0.0.0.0 for every interface)",
)
@click.option("--port", type=click.IntRange(0, 65535), default=8300, show_default=True)
def ui(db_url, host, port) -> None:
    """A live, read-only dashboard in the browser: every sweep's progress, orch compare and
    orch query with intervals, trials, figures, two sweeps compared, downloads equal to
    orch export. Never creates, migrates or writes the database; write requests answer 405.
    Ctrl-C stops it."""
    from orchestrator.ui.server import serve  # lazy: pandas, SQLAlchemy

    serve(db_url, host, port, say=lambda line: click.echo(line, err=True))
