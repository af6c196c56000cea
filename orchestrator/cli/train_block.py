"""`orch train block-drafter`: DDTree's block-diffusion drafter for a target, into a named
checkpoint (engine/train/block_drafter_train.py); a sweep uses it as `ddtree` with
`drafter: block, checkpoint: NAME`."""

from __future__ import annotations

import click

from engine.model_names import canonical_name
from orchestrator.cli.train_common import phase_bars


@click.command("block-drafter")
@click.option("--name", default=None, help="checkpoint name (default: block-drafter-TARGET)")
@click.option("--target", required=True, help="the target model whose states it reads")
@click.option("--draft", default=None, help="unused: the drafter replaces the draft model")
@click.option("--data", default="humaneval", show_default=True, help="prompt set to train on")
@click.option("--holdout", default=20, show_default=True, help="first prompts left out (eval)")
@click.option("--sequences", default=32, show_default=True, help="training chunks")
@click.option("--seq-len", default=128, show_default=True, help="tokens per chunk")
@click.option("--steps", default=200, show_default=True)
@click.option("--batch", default=2, show_default=True, help="chunks per step")
@click.option("--anchors", default=8, show_default=True, help="blocks per chunk per step")
@click.option("--lr", default=1e-3, show_default=True)
@click.option("--block-size", default=8, show_default=True, help="L, positions per forward")
@click.option("--layers", default=2, show_default=True)
@click.option("--heads", default=4, show_default=True)
@click.option("--intermediate", default=0, show_default=True, help="MLP width (0: 2 x hidden)")
@click.option("--save-every", default=50, show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option("--resume", is_flag=True, help="continue the unfinished checkpoint NAME")
def block_drafter(name, target, draft, resume, **flags) -> None:
    """Train DDTree's block-diffusion drafter on the target's hidden states (CPU is fine at the
    default toy scale); prints the checkpoint folder and sha256."""
    from engine.checkpoint import folder, load  # lazy: torch
    from engine.models import resolve  # lazy: torch
    from engine.train.block_drafter_train import TrainConfig, summary, train  # lazy: torch

    target = canonical_name(target)
    name = name or f"block-drafter-{target.replace('/', '_')}"[:100]
    folder(name)  # a bad name fails here
    cfg = TrainConfig(target=target, **flags)
    resolve(target)  # an unknown model fails before anything loads
    with phase_bars() as progress:
        ckpt = train(name, cfg, resume, progress)
    click.echo(summary(load(name)[1]), err=True)
    click.echo(f"checkpoint {ckpt.name}: {ckpt.path}")
    click.echo(f"sha256 {ckpt.sha256}")
