"""`orch tag` and `orch note`: a sweep's tags and note (orchestrator/store/labels.py), shown
by `orch ui`; they never change the sweep's trials."""

from __future__ import annotations

import click

from orchestrator.cli.options import db_option


@click.command()
@click.argument("sweep")
@click.argument("tags", nargs=-1)
@click.option("--remove", "-r", multiple=True, metavar="TAG", help="a tag to take off, repeatable")
@db_option
def tag(sweep, tags, remove, db_url) -> None:
    """Add TAGS to SWEEP (one word each: letters, digits, _ . : + -), or take them off with
    --remove; prints the sweep's tags. Example: orch tag dynatree-grid h100 paper-fig3"""
    from orchestrator.store import Store  # lazy: SQLAlchemy

    store = Store(db_url, mode="write")
    try:
        now = store.tag(sweep, tags, remove)
    finally:
        store.close()
    click.echo(f"sweep {sweep!r}: tags {', '.join(now) if now else '(none)'}")


@click.command()
@click.argument("sweep")
@click.argument("text", required=False)
@click.option("--clear", is_flag=True, help="remove the sweep's note")
@db_option
def note(sweep, text, clear, db_url) -> None:
    """Set SWEEP's note to TEXT (quote it; `-` reads it from stdin), or --clear it; without
    either, print it."""
    from orchestrator.store import Store  # lazy: SQLAlchemy

    if text and clear:
        raise click.UsageError("give TEXT or --clear, not both")
    if text == "-":
        text = click.get_text_stream("stdin").read().strip()
    store = Store(db_url, mode="write" if text or clear else "read")
    try:
        if text or clear:
            store.note(sweep, None if clear else text)
            click.echo(f"sweep {sweep!r}: note {'removed' if clear else 'saved'}")
        else:
            click.echo(store.sweep(sweep).get("note") or "(no note)")
    finally:
        store.close()
