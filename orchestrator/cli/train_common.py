"""What the `orch train` commands that read a dataset and resume a checkpoint share (`orch train
nde`, `orch train talf`): the prompt-selection and resume options, the resume checks made before
any model loads, and the closing lines naming the checkpoint."""

from __future__ import annotations

from typing import Any

import click

from engine.config import ConfigError
from engine.datasets import DatasetError, load_prompts


def prompt_options(prompts_default: int, prompts_help: str):
    """`--dataset`, `--prompts` and `--prompt-offset`: the training prompts are the `prompts`
    first of the dataset after the `prompt-offset` held out for evaluation."""

    def decorate(f):
        f = click.option(
            "--prompt-offset",
            type=int,
            default=0,
            show_default=True,
            help="skip this many prompts of the dataset (hold out the evaluation prompts)",
        )(f)
        f = click.option(
            "--prompts", type=int, default=prompts_default, show_default=True, help=prompts_help
        )(f)
        return click.option(
            "--dataset", default="humaneval", show_default=True, help="training prompts"
        )(f)

    return decorate


def resume_options(f):
    """`--stop-after`, `--resume` and `--seed`."""
    f = click.option("--seed", type=int, default=0, show_default=True)(f)
    f = click.option("--resume", is_flag=True, help="continue the unfinished checkpoint NAME")(f)
    return click.option(
        "--stop-after",
        type=int,
        default=None,
        help="stop after this step, leaving the checkpoint resumable",
    )(f)


def resumable(name: str, kind: str, resume: bool) -> tuple[Any, dict[str, Any]] | None:
    """The unfinished checkpoint `name` of `kind` and its state (engine/checkpoint.py), or
    None. ConfigError when --resume has nothing to continue, or when without it `name` is
    unfinished (a fresh run would overwrite it)."""
    from engine import checkpoint  # lazy: torch

    saved = checkpoint.resumable(name, kind)
    if resume and saved is None:
        raise ConfigError(f"no unfinished {kind} checkpoint {name!r} to resume")
    if not resume and saved is not None:
        raise ConfigError(
            f"checkpoint {name!r} is unfinished: pass --resume to continue it, "
            "or choose another --name"
        )
    return saved


def training_prompts(dataset: str, prompts: int, prompt_offset: int) -> list[str]:
    """The `prompts` prompts of `dataset` after the first `prompt_offset`; ConfigError for an
    unknown or unreadable dataset."""
    try:
        return load_prompts(dataset, prompt_offset + prompts)[prompt_offset:]
    except DatasetError as e:
        raise ConfigError(str(e)) from None


def echo_checkpoint(ckpt) -> None:
    """The closing lines: the checkpoint, whether it is finished, its folder and sha256."""
    state = "finished" if ckpt.done else f"unfinished at step {ckpt.step} (--resume continues)"
    click.echo(f"checkpoint {ckpt.name} ({state}): {ckpt.path}")
    click.echo(f"sha256 {ckpt.sha256}")
