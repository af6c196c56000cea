"""`orch certify`: the distribution checks a sweep's sampled trials rest on, run once per
verifier and setting and stored (orchestrator/results/certificates.py)."""

from __future__ import annotations

import warnings

import click

from orchestrator.cli.options import db_option, sweep_name


def _line(record: dict, stored: bool) -> str:
    draft = ""
    if (record["draft_temperature"], record["draft_top_p"]) != (
        record["temperature"],
        record["top_p"],
    ):
        draft = f", draft T={record['draft_temperature']:g} top_p={record['draft_top_p']:g}"
    result = "passed" if record["passed"] else "FAILED"
    if not record["support_ok"]:
        result += " (a sample outside the target's top-p support)"
    when = "stored" if stored else f"ran {record['seconds']:.1f}s"
    return (
        f"{record['verifier']:<17} {record['tree_sampling']:<19} "
        f"T={record['temperature']:g} top_p={record['top_p']:g}{draft}: p={record['p_value']:.3g}"
        f" power={record['power']:.3f} {result} [{when}]"
    )


@click.command()
@sweep_name()
@click.option("--rerun", is_flag=True, help="run every check again, stored ones too")
@db_option
def certify(sweep, rerun, db_url) -> None:
    """Certify the sampled trials of SWEEP (default: the most recent; pending trials too): for
    each verifier, tree sampling and sampling setting among them, a chi-square test of the
    verifier's output law through generate() on a toy pair (engine/certify/distribution.py),
    stored once for every sweep. `orch query --where lossless=tested` and `orch compare` then
    show it. Exit code 1 when a check fails."""
    from orchestrator.results.certificates import certify as run  # lazy: torch (engine.certify)
    from orchestrator.store import Store  # lazy: SQLAlchemy

    store = Store(db_url, mode="write")
    try:
        info = store.sweep(sweep)
        configs = store.configs(info["id"])
        click.echo(f"sweep {info['name']!r}: {len(configs)} trials in {store.display_url}")
        with warnings.catch_warnings():  # transformers' deprecation notes about its cache API
            warnings.simplefilter("ignore", FutureWarning)
            records = run(store, configs, rerun, lambda r, s: click.echo(_line(r, s)))
    finally:
        store.close()
    failed = sum(not r["passed"] for r in records)
    if not records:
        click.echo("no sampled trial with a drafted tree: nothing to certify")
    else:
        click.echo(f"{len(records) - failed} of {len(records)} checks passed")
    if failed:
        raise SystemExit(1)
