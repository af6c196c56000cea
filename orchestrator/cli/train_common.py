"""What the `orch train` commands share: the prompt-selection and resume options (`orch train
nde`, `talf`, `eagle`), the resume checks made before any model loads, the progress bars per
phase (`block-drafter`, `eagle`), and the closing lines naming the checkpoint."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
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


@contextlib.contextmanager
def phase_bars() -> Iterator[Callable[[str, int, int], None]]:
    """A training's `progress(phase, done, total)` callback drawing one bar per phase on
    stderr (the phase's parenthesised detail beside its bar); the bars closed on exit."""
    from tqdm import tqdm  # lazy: tqdm (a quarter of `orch --help`'s start-up)

    bars: dict[str, Any] = {}

    def progress(phase: str, done: int, total: int) -> None:
        key = phase.split(" (")[0]
        bar = bars.get(key)
        if bar is None:
            bar = bars[key] = tqdm(total=total, desc=key, file=click.get_text_stream("stderr"))
            bar.update(done - 1)
        bar.set_postfix_str(phase[len(key) :].strip(" ()"))
        bar.update(done - bar.n)

    try:
        yield progress
    finally:
        for bar in bars.values():
            bar.close()


def echo_checkpoint(ckpt) -> None:
    """The closing lines: the checkpoint, whether it is finished, its folder and sha256."""
    state = "finished" if ckpt.done else f"unfinished at step {ckpt.step} (--resume continues)"
    click.echo(f"checkpoint {ckpt.name} ({state}): {ckpt.path}")
    click.echo(f"sha256 {ckpt.sha256}")
