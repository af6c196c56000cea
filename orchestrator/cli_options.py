"""Options shared by the database commands of `orch`."""

from __future__ import annotations

import click

db_option = click.option(
    "--db",
    "db_url",
    default=None,
    metavar="URL",
    help="database URL (default: $ORCH_DB_URL, else sqlite:///orch.db)",
)
format_option = click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "csv"]),
    default="table",
    show_default=True,
    help="json: one JSON list of row objects",
)
sweep_option = click.option(
    "--sweep", default=None, metavar="NAME", help="only trials of this sweep (default: all)"
)
where_option = click.option(
    "--where",
    multiple=True,
    metavar="COL OP VALUE",
    help="filter, repeatable: method=dynatree, depth>=4, target=NAME",
)
