"""`orch train nde | talf | block-drafter | eagle | eagle-export | eagle-calibration | list`:
train the papers' learned components into named checkpoints under ORCH_HOME/checkpoints
(engine/checkpoint.py) that sweeps use by name, and measure them (`eagle-calibration`, the
SALF & TALF paper's Fig. 2(b)). Each trainer's command lives beside its trainer and is added
to this group."""

from __future__ import annotations

import json

import click

from orchestrator.cli.train_block import block_drafter
from orchestrator.cli.train_eagle import eagle_calibration, eagle_export, train_eagle
from orchestrator.cli.train_nde import train_nde
from orchestrator.cli.train_talf import train_talf


@click.group("train")
def train() -> None:
    """Train the papers' learned components (NDE, TALF, block drafter, EAGLE head) into named
    checkpoints."""


@train.command("list")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
def train_list(fmt: str) -> None:
    """The checkpoints under ORCH_HOME/checkpoints: name, kind, step, finished, sha256."""
    from engine.checkpoint import list_all  # lazy: torch

    rows = [
        {"name": c.name, "kind": c.kind, "step": c.step, "done": c.done, "sha256": c.sha256}
        for c in list_all()
    ]
    if fmt == "json":
        click.echo(json.dumps(rows))
        return
    if not rows:
        click.echo("no checkpoints (train one: orch train --help)")
        return
    for r in rows:
        state = "finished" if r["done"] else f"unfinished at step {r['step']}"
        click.echo(f"{r['name']}  {r['kind']}  {state}  sha256 {r['sha256'][:12]}")


train.add_command(block_drafter)
train.add_command(train_eagle)
train.add_command(eagle_export)
train.add_command(eagle_calibration)
train.add_command(train_nde)
train.add_command(train_talf)
