"""`orch train eagle`: an EAGLE head for a target (engine/train/eagle.py) into a named
checkpoint of kind "eagle"; a pair drafts with it as `draft: eagle:NAME` under every tree
method (docs/eagle.md). `orch train eagle-export` writes one in the public format;
`orch train eagle-calibration` measures heads as the SALF & TALF paper's Fig. 2(b)
(engine/train/eagle_calibration.py)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, replace

import click

from engine.config import ConfigError
from orchestrator.cli.train_common import echo_checkpoint, phase_bars, resumable, resume_options

# flag -> TrainConfig field, for the flags a --resume run must not change (--steps may grow)
FIELDS = (
    "target",
    "loss",
    "init",
    "sequences",
    "seq_len",
    "batch",
    "lr",
    "lambda_reg",
    "lambda_cls",
    "depth",
    "top_k",
    "lambda_distil",
    "tree_k",
    "roots",
    "save_every",
    "seed",
    "draft_vocab",
    "precision",
)


@click.command("eagle")
@click.option("--name", default=None, help="checkpoint name (default: eagle-LOSS-TARGET)")
@click.option("--target", default="tiny-llama", show_default=True, help="a Llama/Qwen2 target")
@click.option(
    "--loss",
    type=click.Choice(["eagle", "hass", "talf"]),
    default="eagle",
    show_default=True,
    help="eagle: SmoothL1 on the features + cross-entropy (Sec. 2.2, 4.1); hass: the same over "
    "--depth steps with the head's features fed back, + top-K distillation; talf: Algorithm 1 "
    "over the target's beam trees (--tree-k, --depth), no regression",
)
@click.option("--init", default=None, help="start from this head (eagle:NAME or eagle:PATH)")
@click.option("--sequences", type=int, default=32, show_default=True, help="corpus chunks")
@click.option("--seq-len", type=int, default=128, show_default=True, help="tokens per chunk")
@click.option("--steps", type=int, default=200, show_default=True)
@click.option("--batch", type=int, default=4, show_default=True, help="chunks per step")
@click.option("--lr", type=float, default=3e-3, show_default=True)
@click.option("--lambda-reg", type=float, default=1.0, show_default=True, help="Sec. 4.1: 1")
@click.option("--lambda-cls", type=float, default=10.0, show_default=True, help="Sec. 4.1: 10")
@click.option("--depth", type=int, default=3, show_default=True, help="hass steps, talf depth")
@click.option("--top-k", type=int, default=10, show_default=True, help="hass: distillation K")
@click.option("--lambda-distil", type=float, default=10.0, show_default=True, help="hass: 10")
@click.option("--tree-k", type=int, default=4, show_default=True, help="talf: tree k (Sec. 4.1)")
@click.option("--roots", type=int, default=8, show_default=True, help="talf: trees per chunk")
@click.option("--save-every", type=int, default=50, show_default=True)
@click.option(
    "--draft-vocab",
    type=int,
    default=0,
    show_default=True,
    help="> 0: draft over the corpus's N most frequent tokens (EAGLE-3's reduced vocabulary)",
)
@click.option(
    "--precision",
    type=click.Choice(["float32", "bfloat16"]),
    default="float32",
    show_default=True,
    help="bfloat16: the target's features and the head's forward (autocast; fp32 weights)",
)
@resume_options
@click.option("--device", default=None, help="auto, cpu, cuda, cuda:N, mps (default: cpu)")
@click.pass_context
def train_eagle(ctx, name, stop_after, resume, device, **flags) -> None:
    """Train an EAGLE head on the target's features over the stdlib corpus (CPU is fine at
    the default toy scale); prints the checkpoint folder and sha256."""
    from engine import checkpoint  # lazy: torch
    from engine.devices import check_device  # lazy: torch
    from engine.models import resolve  # lazy: torch
    from engine.train.eagle import KIND, TrainConfig, config_from, summary, train  # lazy: torch

    target = flags["target"]
    name = name or f"eagle-{flags['loss']}-{target}".replace("/", "_").replace(":", "_")[:100]
    checkpoint.folder(name)  # a bad name fails here
    if device is not None:
        check_device(device)
    if stop_after is not None and stop_after < 1:
        raise ConfigError(f"--stop-after must be >= 1, got {stop_after}")
    saved = resumable(name, KIND, resume)
    if resume:
        cfg = config_from(saved[0].config)
        stored = asdict(cfg)
        given = {
            f: flags[f]
            for f in FIELDS
            if ctx.get_parameter_source(f) == click.core.ParameterSource.COMMANDLINE
        }
        changed = [f"--{f.replace('_', '-')}" for f, v in given.items() if v != stored[f]]
        if changed:
            raise ConfigError(
                "--resume continues with the stored training config; these differ: "
                + ", ".join(changed)
            )
        if ctx.get_parameter_source("steps") == click.core.ParameterSource.COMMANDLINE:
            cfg = replace(cfg, steps=flags["steps"])
    else:
        if (checkpoint.folder(name) / "meta.json").exists():
            raise ConfigError(f"checkpoint {name!r} exists; choose another --name")
        cfg = TrainConfig(**flags)
    resolve(cfg.target)  # an unknown model fails before anything loads
    if cfg.init is not None:
        resolve(cfg.init)
    with phase_bars() as progress:
        ckpt = train(name, cfg, resume, progress, stop_after, device)
    if ckpt.done:
        click.echo(summary(checkpoint.load(name, KIND)[1]), err=True)
    echo_checkpoint(ckpt)


@click.command("eagle-export")
@click.option("--name", required=True, help="the finished eagle checkpoint")
@click.option("--out", "-o", required=True, help="the folder to write")
@click.option(
    "--with-embedding",
    is_flag=True,
    help="also write the target's embedding as embed_tokens.weight (EAGLE's own loader needs it)",
)
def eagle_export(name: str, out: str, with_embedding: bool) -> None:
    """Write a trained head in the public EAGLE format (config.json + pytorch_model.bin); a
    pair drafts with the folder as `eagle:PATH`, EAGLE's code loads it too."""
    from engine.train.eagle import export  # lazy: torch

    click.echo(f"wrote {export(name, out, with_embedding)}")


@click.command("eagle-calibration")
@click.option("--head", "heads", multiple=True, required=True, help="eagle:NAME, repeatable")
@click.option("--target", required=True, help="the heads' target (a Llama/Qwen2 model)")
@click.option(
    "--positions", type=int, default=256, show_default=True, help="test positions; 0: all"
)
@click.option("--ranks", type=int, default=5, show_default=True, help="n = 1 .. RANKS")
@click.option("--bins", type=int, default=10, show_default=True, help="ECE's equal-width bins M")
@click.option("--sequences", type=int, default=16, show_default=True, help="held-out chunks")
@click.option("--seq-len", type=int, default=128, show_default=True, help="tokens per chunk")
@click.option("--seed", type=int, default=0, show_default=True, help="draws the positions")
@click.option("--json", "json_out", default=None, help="also write the record to this file")
@click.option("--device", default=None, help="auto, cpu, cuda, cuda:N, mps (default: cpu)")
def eagle_calibration(heads, target, positions, json_out, device, **flags) -> None:
    """The SALF & TALF paper's Fig. 2(b): per head and rank n, the head's second drafting
    iteration self-conditioned on its n-th ranked token, against the target's greedy token
    (top-1 accuracy and ECE, Appendix A), over positions of the held-out stdlib chunks."""
    from engine.devices import check_device  # lazy: torch
    from engine.models import resolve  # lazy: torch
    from engine.train.eagle_calibration import Diagnostic, run  # lazy: torch

    cfg = Diagnostic(heads=tuple(heads), target=target, positions=positions or None, **flags)
    if device is not None:
        check_device(device)
    if json_out is not None and not os.path.isdir(os.path.dirname(os.path.abspath(json_out))):
        raise ConfigError(f"--json {json_out}: no such folder")
    if resolve(target) == "eagle":
        raise ConfigError(f"--target {target!r}: the target model, not an EAGLE head")
    for h in heads:
        resolve(h)  # an unknown head fails before anything loads
    with phase_bars() as progress:
        record = run(cfg, progress, device)
    click.echo(table(record))
    if json_out is not None:
        with open(json_out, "w") as f:
            json.dump(record, f, indent=1)
        click.echo(f"wrote {json_out}", err=True)


def table(record: dict) -> str:
    """One row per head and rank: accuracy, ECE, count."""
    width = max(len("head"), *(len(h["head"]) for h in record["heads"]))
    lines = [f"{'head':<{width}}  rank  accuracy     ECE  count"]
    for h in record["heads"]:
        for r in h["rows"]:
            lines.append(
                f"{h['head']:<{width}}  {r['rank']:>4}  {r['accuracy']:>8.3f}  {r['ece']:>6.3f}"
                f"  {r['count']:>5}"
            )
    return "\n".join(lines)
