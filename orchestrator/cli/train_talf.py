"""`orch train talf`: train a draft with TALF ("salf_talf.txt" Algorithm 1) or, with
`--loss distill`, with standard token-level distillation (the baseline), into a checkpoint of
kind "talf" that decoding uses as the draft model `ckpt:NAME` (engine/train/talf_train.py)."""

from __future__ import annotations

from dataclasses import asdict

import click

from engine.config import ConfigError
from orchestrator.cli.train_common import (
    echo_checkpoint,
    prompt_options,
    resumable,
    resume_options,
    training_prompts,
)

# flag -> TrainConfig field, for the flags a --resume run must not change
FIELDS = {
    "target": "target",
    "draft": "draft",
    "target_dtype": "target_dtype",
    "loss": "loss",
    "top_k": "top_k",
    "depth": "depth",
    "train_layers": "train_layers",
    "steps": "steps",
    "roots": "roots",
    "lr": "lr",
    "warmup": "warmup",
    "dataset": "dataset",
    "prompts": "prompts",
    "prompt_offset": "prompt_offset",
    "prompt_tokens": "prompt_tokens",
    "response_tokens": "response_tokens",
    "save_every": "save_every",
    "seed": "seed",
}


@click.command("talf")
@click.option("--name", default=None, help="checkpoint name (default: LOSS-DRAFT)")
@click.option("--target", default="qwen2.5-coder-1.5b", show_default=True)
@click.option("--draft", default="qwen2.5-coder-0.5b", show_default=True, help="base draft")
@click.option(
    "--target-dtype",
    default="auto",
    show_default=True,
    help="the target's dtype (it only makes labels; bf16 halves its memory)",
)
@click.option(
    "--loss",
    type=click.Choice(["talf", "distill"]),
    default="talf",
    show_default=True,
    help="talf: Algorithm 1; distill: token-level distillation (Sec. 2.2), the baseline",
)
@click.option("--top-k", type=int, default=4, show_default=True, help="TALF tree k (Sec. 4.1)")
@click.option("--depth", type=int, default=3, show_default=True, help="TALF tree depth")
@click.option(
    "--train-layers",
    type=int,
    default=2,
    show_default=True,
    help="trainable last decoder layers (+ final norm)",
)
@click.option("--steps", type=int, default=100, show_default=True)
@click.option("--roots", type=int, default=8, show_default=True, help="trees per step")
@click.option("--lr", type=float, default=3e-4, show_default=True, help="App. D: 3e-4")
@click.option("--warmup", type=int, default=10, show_default=True, help="warm-up steps")
@prompt_options(100, "training prompts")
@click.option("--prompt-tokens", type=int, default=256, show_default=True)
@click.option(
    "--response-tokens",
    type=int,
    default=32,
    show_default=True,
    help="target's greedy continuation appended to each prompt; roots lie in it",
)
@click.option("--save-every", type=int, default=10, show_default=True)
@resume_options
@click.option("--device", default=None, help="auto, cpu, cuda, cuda:N, mps")
@click.pass_context
def train_talf(ctx, name, stop_after, resume, device, **flags) -> None:
    """Train a draft with TALF or standard distillation (--loss) into checkpoint NAME."""
    import torch  # lazy: torch
    from tqdm import tqdm  # lazy: tqdm (a quarter of `orch --help`'s start-up)

    from engine import checkpoint  # lazy: torch
    from engine.devices import check_device, pick_dtype  # lazy: torch
    from engine.models import model_config, resolve  # lazy: torch
    from engine.train.talf_train import KIND, TrainConfig, config_from, train  # lazy: torch

    name = name or f"{flags['loss']}-{flags['draft']}".replace("/", "_").replace(":", "_")
    checkpoint.folder(name)  # a bad name fails here
    check_device(device)
    pick_dtype(flags["target_dtype"], torch.device("cpu"))  # an unknown dtype fails here
    saved = resumable(name, KIND, resume)
    if resume:
        cfg = config_from(saved[0].config)
        stored = asdict(cfg)
        changed = [
            f"--{flag.replace('_', '-')} (stored {stored[field]!r}, given {flags[flag]!r})"
            for flag, field in FIELDS.items()
            if ctx.get_parameter_source(flag) == click.core.ParameterSource.COMMANDLINE
            and flags[flag] != stored[field]
        ]
        if changed:
            raise ConfigError(
                "--resume continues with the stored training config; these differ: "
                + ", ".join(changed)
            )
    else:
        if (checkpoint.folder(name) / "meta.json").exists():
            raise ConfigError(f"checkpoint {name!r} exists; choose another --name")
        try:
            cfg = TrainConfig(**{field: flags[flag] for flag, field in FIELDS.items()})
        except ValueError as e:
            raise ConfigError(str(e)) from None
    if stop_after is not None and stop_after < 1:
        raise ConfigError(f"--stop-after must be >= 1, got {stop_after}")
    resolve(cfg.target), resolve(cfg.draft)
    layers = (model_config(cfg.draft) or {}).get("num_hidden_layers")
    if isinstance(layers, int) and cfg.train_layers > layers:
        raise ConfigError(
            f"--train-layers {cfg.train_layers}: the draft {cfg.draft} has {layers} decoder layers"
        )
    training_prompts(cfg.dataset, cfg.prompts, cfg.prompt_offset)

    start = saved[0].step if resume else 0
    end = cfg.steps if stop_after is None else min(cfg.steps, stop_after)
    bar = tqdm(total=end, initial=start, desc=f"train {cfg.loss}", unit="step")

    def on_step(step: int, loss: float) -> None:
        bar.update(1)
        bar.set_postfix(loss=f"{loss:.3f}")

    try:
        ckpt = train(
            cfg, name, resume=resume, stop_after=stop_after, device=device, on_step=on_step
        )
    except ValueError as e:
        raise ConfigError(str(e)) from None
    finally:
        bar.close()
    echo_checkpoint(ckpt)
