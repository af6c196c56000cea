"""`orch delete`: delete measured results on purpose, so that they are measured again (a trial
measured on a loaded machine would otherwise stand for good). Thin over orchestrator.store."""

from __future__ import annotations

import click

from orchestrator.cli.options import db_option, where_option


@click.command()
@click.option("--sweep", required=True, metavar="NAME", help="the sweep whose results to delete")
@where_option
@click.option("--yes", "-y", is_flag=True, help="do not ask for confirmation")
@db_option
def delete(sweep, where, yes, db_url) -> None:
    """Delete the results of SWEEP's finished trials (those matching every --where, e.g.
    --where 'method=linear'), in one transaction. The trials stay in the sweep, back to
    pending: `orch resume NAME` (or `orch submit FILE`) measures them again. A result
    belongs to its config, so a sweep sharing the config loses it too (the prompt says how
    many are shared). `orch submit FILE --rerun` measures every done trial again instead,
    keeping each old result until its new one replaces it."""
    from orchestrator.results import apply_where, load_frame  # lazy: pandas
    from orchestrator.store import Store  # lazy: SQLAlchemy

    store = Store(db_url, mode="write")
    try:
        ids = [int(i) for i in apply_where(load_frame(store, sweep), where)["trial_id"]]
        if not ids:
            click.echo(f"no results of sweep {sweep!r} match the --where filters: nothing deleted")
            return
        shared = store.shared_trials(sweep, ids)
        also = f" ({shared} shared with other sweeps)" if shared else ""
        if not yes:
            click.confirm(
                f"delete {len(ids)} results of sweep {sweep!r}{also} from {store.display_url}?",
                abort=True,
                err=True,
            )
        n = store.delete_results(ids)
    finally:
        store.close()
    click.echo(
        f"deleted {n} results of sweep {sweep!r}{also}; `orch resume {sweep}` measures them again"
    )
