"""`orch profile`: a device's forward-cost curves of a target and a draft into `profiles`."""

from __future__ import annotations

import click

from engine.config import ENGINE_SPECS
from engine.cost_model import (
    DEFAULT_CONTEXTS,
    DEFAULT_REPEATS,
    DEFAULT_SIZES,
    check_grid,
    parse_ints,
)
from orchestrator.cli.options import db_option


@click.command()
@click.option("--target", required=True, help="target model name or folder")
@click.option("--draft", required=True, help="draft model name or folder")
@click.option("--dtype", default="auto", show_default=True, help="both roles' dtype")
@click.option("--target-dtype", default=None, help="the target's dtype (default: --dtype)")
@click.option("--draft-dtype", default=None, help="the draft's dtype (default: --dtype)")
@click.option(
    "--sizes",
    default=",".join(map(str, DEFAULT_SIZES)),
    show_default=True,
    help="new tokens per forward, comma-separated",
)
@click.option(
    "--contexts",
    default=",".join(map(str, DEFAULT_CONTEXTS)),
    show_default=True,
    help="cached context lengths, comma-separated",
)
@click.option("--engine", type=click.Choice(ENGINE_SPECS), default="eager", show_default=True)
@click.option("--device", default="auto", show_default=True)
@click.option("--repeats", type=click.IntRange(min=1), default=DEFAULT_REPEATS, show_default=True)
@db_option
def profile(
    target,
    draft,
    dtype,
    target_dtype,
    draft_dtype,
    sizes,
    contexts,
    engine,
    device,
    repeats,
    db_url,
) -> None:
    """Measure seconds per forward of N new tokens after C cached tokens for the target and
    the draft on this device, and store both curves (replacing an earlier profile of the same
    device, model, dtype and engine)."""
    from engine.devices import check_device, pick_device, pick_dtype  # lazy: torch
    from engine.models import check_engine, check_positions, resolve  # lazy: torch
    from orchestrator.results import profile_models, save_curves  # lazy: pandas
    from orchestrator.store import Store  # lazy: SQLAlchemy

    n, c = parse_ints(sizes, "--sizes"), parse_ints(contexts, "--contexts")
    check_grid(n, c, repeats)
    resolve(target), resolve(draft), check_engine(engine, target, draft)
    for name in (target, draft):
        check_positions(name, max(c) + max(n) + 1, "--contexts plus --sizes")
    dev = pick_device(check_device(device))
    roles = [("target", target, target_dtype or dtype), ("draft", draft, draft_dtype or dtype)]
    for _, _, dt in roles:
        pick_dtype(dt, dev)  # an unknown dtype fails here, before any model loads
    store = Store(db_url, mode="create")  # a bad database fails before the measurement
    measured = profile_models(roles, n, c, str(dev), engine, repeats, log=click.echo)
    save_curves(store, measured)
    for curve, _ in measured:
        click.echo(
            f"stored {curve.model} {curve.dtype} {curve.engine} on {curve.device_name} "
            f"({len(curve.points)} points) in {store.display_url}"
        )


@click.command("profile-import")
@click.argument("path", metavar="PROFILE_JSON")
@db_option
def profile_import(path, db_url) -> None:
    """Store the curves of a profile file measured elsewhere: bench/gpu.py writes one on a GPU
    machine with no database (its --profile-out; bench/records/gpu_h100_profile.json is an
    H100's). A key's earlier curve (device, model, dtype, engine) is replaced; then `orch
    compare --predict-on DEVICE` predicts the stored trials on that device."""
    from orchestrator.results import read_profile_file, save_curves  # lazy: pandas
    from orchestrator.store import Store  # lazy: SQLAlchemy

    measured = read_profile_file(path)  # every fault before the database is opened
    store = Store(db_url, mode="create")
    save_curves(store, measured)
    for curve, info in measured:
        click.echo(
            f"stored {curve.model} {curve.dtype} {curve.engine} on {curve.device_name} "
            f"({len(curve.points)} points; {info.get('driver') or 'no driver'}) "
            f"in {store.display_url}"
        )
