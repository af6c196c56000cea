"""`orch train nde`: collect the NDE selector's data on a model pair (or read a data file
written before), train the selector, save the checkpoint (engine/drafters/delayed/selector.py,
engine/train/nde_data.py, engine/train/nde.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import click

from engine.config import ConfigError
from engine.cost_model import ForwardCurve, check_grid
from engine.datasets import encode_prompt
from orchestrator.cli.options import Finite
from orchestrator.cli.profile import parse_ints
from orchestrator.cli.train_common import (
    echo_checkpoint,
    prompt_options,
    resumable,
    resume_options,
    training_prompts,
)


@click.command("nde")
@click.option("--name", default=None, help="checkpoint name (default: nde-TARGET-DRAFT)")
@click.option("--target", default="qwen2.5-coder-1.5b", show_default=True)
@click.option("--draft", default="qwen2.5-coder-0.5b", show_default=True)
@prompt_options(350, "the paper: 350")
@click.option(
    "--prompt-tokens",
    type=click.IntRange(min=1),
    default=None,
    help="truncate prompts to N tokens",
)
@click.option(
    "--max-new-tokens", type=int, default=64, show_default=True, help="trajectory length per prompt"
)
@click.option("--stride", type=int, default=16, show_default=True, help="a root every N tokens")
@click.option("--samples", type=int, default=4, show_default=True, help="s of Eq. 1")
@click.option("--k-max", type=int, default=4, show_default=True)
@click.option("--l1-max", type=int, default=8, show_default=True)
@click.option("--l2-max", type=int, default=8, show_default=True)
@click.option("--temperature", type=Finite(min=0.0), default=0.0, show_default=True)
@click.option(
    "--top-p", type=Finite(min=0.0, max=1.0, min_open=True), default=1.0, show_default=True
)
@click.option("--verifier", default=None, help="default: delayed's at the temperature")
@click.option(
    "--latency",
    type=click.Choice(["eq11", "eq11_width"]),
    default="eq11",
    show_default=True,
    help="eq11: as printed; eq11_width: per forward width",
)
@click.option(
    "--latency-curves",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help="JSON with 'curves': {'target', 'draft'} forward-cost curves of this device "
    "(e.g. a bench/records file) instead of measuring them",
)
@click.option("--profile-sizes", default="1,4,16,64", show_default=True)
@click.option("--profile-contexts", default="64,256", show_default=True)
@click.option(
    "--data",
    "data_path",
    default=None,
    type=click.Path(dir_okay=False),
    help="data file: read if it exists, else collected and written there "
    "(default: ORCH_HOME/nde-data/NAME.pt)",
)
@click.option("--steps", type=int, default=2000, show_default=True)
@click.option("--batch-size", type=int, default=64, show_default=True)
@click.option("--lr", type=float, default=1e-3, show_default=True)
@click.option("--lam", type=float, default=1.0, show_default=True, help="lambda of Eq. 12")
@click.option("--alpha", type=float, default=0.1, show_default=True, help="alpha of Eq. 12")
@click.option(
    "--init",
    type=click.Choice(["uniform", "baseline"]),
    default="uniform",
    show_default=True,
    help="the policy at step 0 (engine/train/nde.py TrainConfig)",
)
@click.option("--save-every", type=int, default=100, show_default=True)
@resume_options
def train_nde(
    name,
    target,
    draft,
    dataset,
    prompts,
    prompt_offset,
    prompt_tokens,
    max_new_tokens,
    stride,
    samples,
    k_max,
    l1_max,
    l2_max,
    temperature,
    top_p,
    verifier,
    latency,
    latency_curves,
    profile_sizes,
    profile_contexts,
    data_path,
    steps,
    batch_size,
    lr,
    lam,
    alpha,
    init,
    save_every,
    stop_after,
    resume,
    seed,
) -> None:
    """Train the delayed-tree paper's NDE delay-and-branch selector (Sec. 6) on TARGET/DRAFT."""
    import torch  # lazy: torch
    from tqdm import tqdm  # lazy: tqdm (a quarter of `orch --help`'s start-up)

    from engine import checkpoint  # lazy: torch
    from engine.models import resolve  # lazy: torch
    from engine.train.nde import KIND, TrainConfig, train  # lazy: torch

    name = name or f"nde-{target}-{draft}".replace("/", "_")
    checkpoint.folder(name)  # a bad name fails here
    cfg = _parse(
        TrainConfig,
        steps=steps,
        batch_size=batch_size,
        lr=lr,
        lam=lam,
        alpha=alpha,
        latency=latency,
        save_every=save_every,
        seed=seed,
        init=init,
    )
    if stop_after is not None and stop_after < 1:
        raise ConfigError(f"--stop-after must be >= 1, got {stop_after}")
    saved = resumable(name, KIND, resume)
    path = Path(data_path) if data_path else checkpoint.root().parent / "nde-data" / f"{name}.pt"
    if path.exists():
        data = torch.load(path, weights_only=False)
    else:
        from engine.train.nde_data import CollectConfig  # lazy: torch

        collect_cfg = _checked(
            CollectConfig(
                k_max,
                l1_max,
                l2_max,
                samples,
                stride,
                max_new_tokens,
                temperature,
                top_p,
                verifier,
                seed=seed,
            )
        )
        sizes = parse_ints(profile_sizes, "--profile-sizes")
        contexts = parse_ints(profile_contexts, "--profile-contexts")
        if prompts < 1 or prompt_offset < 0:
            raise ConfigError("--prompts must be >= 1 and --prompt-offset >= 0")
        chosen = training_prompts(dataset, prompts, prompt_offset)
        resolve(target), resolve(draft)  # a bad model name fails before anything loads
        data = _collect(
            target,
            draft,
            chosen,
            prompt_tokens,
            collect_cfg,
            sizes,
            contexts,
            tqdm,
            _read_curves(latency_curves) if latency_curves else None,
        )
        data["prompts"] = {"dataset": dataset, "offset": prompt_offset, "n": prompts}
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(data, path)
        click.echo(f"data: {len(data['E'])} roots written to {path}", err=True)
    meta = {
        "target": target,
        "draft": draft,
        "data": str(path),
        "collect": data["collect"],
        "prompts": data.get("prompts"),
        "roots": len(data["E"]),
    }
    with tqdm(total=steps, desc="train nde", file=None) as bar:
        if resume:
            bar.update(saved[0].step)
        ckpt = train(name, data, cfg, meta, resume, stop_after, bar.update)
    if ckpt.done:
        from engine.drafters.delayed.selector import Latency, build_net  # lazy: torch
        from engine.train.nde import evaluate  # lazy: torch

        _, saved = checkpoint.load(ckpt.name, KIND)
        e = evaluate(build_net(saved), data, Latency.from_dict(saved["latency"]))
        click.echo(
            f"training roots: {e['roots']}; best fixed action (K, L1, L2) = "
            f"{tuple(e['fixed_action'])}; Eq. 9 estimate (tokens/s, Eq. 11 times): "
            f"NDE {e['nde_tps']:.3f}, best fixed {e['fixed_tps']:.3f}, "
            f"per-root oracle {e['oracle_tps']:.3f}"
        )
    echo_checkpoint(ckpt)


def _parse(cls, **kwargs):
    try:
        return cls(**kwargs)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def _checked(cfg):
    """The collection config as given on the command line (verifier None: delayed's default at
    the temperature), checked, with its verifier resolved."""
    from engine.drafters.delayed import DRAFTER as DELAYED  # lazy: torch
    from engine.methods import resolve_method  # lazy: torch

    if (
        min(cfg.k_max, cfg.samples, cfg.stride, cfg.max_new_tokens) < 1
        or min(cfg.l1_max, cfg.l2_max) < 0
    ):
        raise ConfigError(
            "need --k-max, --samples, --stride, --max-new-tokens >= 1 and --l1-max, --l2-max >= 0"
        )
    params = {"verifier": cfg.verifier} if cfg.verifier else {}
    verifier = resolve_method(DELAYED.name, params, cfg.temperature).verifier  # checks the pairing
    return replace(cfg, verifier=verifier)


def _read_curves(path: str):
    """The Latency of a JSON file's {"curves": {"target": ..., "draft": ...}}."""
    from engine.drafters.delayed.selector import Latency  # lazy: torch

    try:
        curves = json.loads(Path(path).read_text())["curves"]
        return Latency(
            ForwardCurve.from_dict(curves["draft"]), ForwardCurve.from_dict(curves["target"])
        )
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"--latency-curves {path}: no target/draft curves ({e})") from None


def _collect(target, draft, prompts, prompt_tokens, cfg, sizes, contexts, tqdm, latency) -> dict:
    """Load the pair, measure the latency curves (the paper's warm-up microbenchmark) unless
    given, collect."""
    from engine.curves import measure_curve  # lazy: torch
    from engine.drafters.delayed.selector import Latency  # lazy: torch
    from engine.models import load_pair  # lazy: torch
    from engine.train.nde_data import collect  # lazy: torch

    check_grid(sizes, contexts, 1)
    pair = load_pair(target, draft)
    ids = [encode_prompt(pair.target.tokenizer, p, prompt_tokens) for p in prompts]
    if latency is None:
        latency = Latency(
            measure_curve(pair.draft.model, draft, sizes, contexts),
            measure_curve(pair.target.model, target, sizes, contexts),
        )
    n = len(ids) * len(range(0, cfg.max_new_tokens, cfg.stride))  # roots, about
    with tqdm(total=n, desc="collect nde data") as bar:
        return collect(pair, ids, cfg, latency, bar.update)
