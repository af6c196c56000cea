"""Training the block drafter (engine/drafters/ddtree/block.py) on the target's hidden states.

Data: the text of a shipped prompt set (prompt, then reference where it has one), leaving out
its first `holdout` prompts (load_prompts takes the first n, so those are the evaluation
prompts a sweep with `prompts: holdout` decodes), tokenized, joined with EOS and cut into
`sequences` chunks of `seq_len` tokens. One no-grad target forward per chunk gives the
features (the hidden states of `target_layers`, concatenated: [T, F]) and the labels: the
target's own greedy token after each position, so the drafter learns what the target would
accept (greedy verification compares drafted tokens with the target's argmax, DDTree
Sec. 4.4), not the text. Both are computed once and kept in memory.

Each step draws `batch` chunks and `anchors` block starts a per chunk (explicit generator) and
minimises the mean cross-entropy of all block positions (block_drafter.block_loss) with AdamW.
Every `save_every` steps the run is saved unfinished (weights, optimizer, step, generator) so
`--resume` continues it exactly; the end saves the weights finished. The checkpoint's config is
this TrainConfig (the drafter's architecture under "drafter"), recorded by every trial that
uses it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable

import torch

from engine import checkpoint
from engine.config import ConfigError
from engine.datasets import DatasetError, load_prompts
from engine.drafters.ddtree.block import (
    KIND,
    BlockDrafter,
    BlockDrafterConfig,
    block_loss,
    default_target_layers,
    target_fingerprint,
    target_parts,
)
from engine.models import load_model


@dataclass(frozen=True)
class TrainConfig:
    target: str  # model name
    data: str = "humaneval"  # a prompt set (engine/datasets.py)
    holdout: int = 20  # its first prompts, left out for evaluation
    sequences: int = 32  # training chunks
    seq_len: int = 128  # tokens per chunk
    steps: int = 200
    batch: int = 2  # chunks per step
    anchors: int = 8  # blocks per chunk per step
    lr: float = 1e-3
    seed: int = 0
    save_every: int = 50
    block_size: int = 8  # L
    layers: int = 2
    heads: int = 4
    intermediate: int = 0  # 0: 2 * hidden

    def __post_init__(self) -> None:
        for k in ("sequences", "steps", "batch", "anchors", "save_every", "block_size", "layers"):
            if getattr(self, k) < 1:
                raise ConfigError(f"--{k.replace('_', '-')} must be >= 1, got {getattr(self, k)}")
        if self.holdout < 0 or not self.lr > 0 or self.heads < 1 or self.intermediate < 0:
            raise ConfigError(
                "--holdout must be >= 0, --lr > 0, --heads >= 1 and --intermediate >= 0"
            )
        if self.seq_len < self.block_size + 2:
            raise ConfigError(f"--seq-len must be >= block size + 2 = {self.block_size + 2}")


Progress = Callable[[str, int, int], None]  # (phase, done, total)


def training_text(cfg: TrainConfig) -> list[str]:
    try:
        prompts = load_prompts(cfg.data)
    except DatasetError as e:
        raise ConfigError(str(e)) from None
    if len(prompts) <= cfg.holdout:
        raise ConfigError(f"{cfg.data} has {len(prompts)} prompts, all within --holdout")
    out = []
    for p in prompts[cfg.holdout :]:
        ref = p.reference if isinstance(p.reference, str) else ""
        out.append(p.text + ("\n" + ref if ref else ""))
    return out


def chunks(tokenizer, texts: list[str], cfg: TrainConfig) -> torch.Tensor:
    """[sequences, seq_len] token ids: the texts joined with EOS, cut into chunks."""
    stream: list[int] = []
    need = cfg.sequences * cfg.seq_len
    for t in texts:
        stream += tokenizer.encode(t) + [tokenizer.eos_token_id]
        if len(stream) >= need:
            break
    if len(stream) < need:
        raise ConfigError(
            f"{cfg.data} beyond --holdout has {len(stream)} tokens; --sequences x --seq-len "
            f"needs {need}"
        )
    return torch.tensor(stream[:need]).view(cfg.sequences, cfg.seq_len)


@torch.inference_mode()
def target_features(
    model, tokens: torch.Tensor, layers: tuple[int, ...], progress: Progress
) -> tuple[torch.Tensor, torch.Tensor]:
    """Features [S, T, F] (hidden_states of `layers`, concatenated) and labels [S, T] (the
    target's greedy next token after each position), one forward per chunk."""
    feats, labels = [], []
    for i, seq in enumerate(tokens):
        out = model(input_ids=seq[None].to(model.device), output_hidden_states=True)
        feats.append(torch.cat([out.hidden_states[j][0] for j in layers], -1).float().cpu())
        labels.append(out.logits[0].argmax(-1).cpu())
        progress("target features", i + 1, len(tokens))
    return torch.stack(feats), torch.stack(labels)


def train(name: str, cfg: TrainConfig, resume: bool, progress: Progress) -> checkpoint.Checkpoint:
    """Train (or with `resume`, continue) checkpoint `name`; returns the finished checkpoint.
    ConfigError when `name` is unfinished and not resumed, or resumed with another config."""
    previous = checkpoint.resumable(name, KIND)
    if previous is not None and not resume:
        raise ConfigError(
            f"checkpoint {name!r} is unfinished (step {previous[0].step}): pass --resume to "
            "continue it, or choose another --name"
        )
    if resume and previous is None:
        raise ConfigError(f"--resume: no unfinished block-drafter checkpoint {name!r}")
    if previous is None and (checkpoint.folder(name) / "meta.json").exists():
        raise ConfigError(
            f"checkpoint {name!r} exists and is finished: choose another --name "
            f"(or remove {checkpoint.folder(name)})"
        )
    target = load_model(cfg.target, device="cpu", dtype="float32")
    mc = target.model.config
    arch = BlockDrafterConfig(
        hidden=mc.hidden_size,
        vocab=mc.vocab_size,
        target_layers=default_target_layers(mc.num_hidden_layers),
        block_size=cfg.block_size,
        layers=cfg.layers,
        heads=cfg.heads,
        intermediate=cfg.intermediate,
    )
    meta = {
        **asdict(cfg),
        "drafter": arch.to_dict(),
        "target_fingerprint": target_fingerprint(target.model),
    }
    if previous is not None and _same_run(previous[0].config) != _same_run(meta):
        raise ConfigError(f"--resume {name!r}: flags other than --steps differ from the run")
    tokens = chunks(target.tokenizer, training_text(cfg), cfg)  # [S, T]
    feats, labels = target_features(target.model, tokens, arch.target_layers, progress)
    embed, head = target_parts(target.model)
    del target  # only the embedding and the head are needed from here: free the layers

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        drafter = BlockDrafter(arch)
    opt = torch.optim.AdamW(drafter.parameters(), lr=cfg.lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(cfg.seed)
    step = 0 if previous is None else checkpoint.restore(previous[1], drafter, opt, gen, "model")
    drafter.train()
    last = (float("nan"), torch.zeros(arch.block_size))
    while step < cfg.steps:
        rows = torch.randint(0, cfg.sequences, (cfg.batch,), generator=gen)  # [B]
        anchors = torch.randint(
            1, cfg.seq_len - cfg.block_size + 1, (cfg.batch, cfg.anchors), generator=gen
        )  # [B, n]
        loss, acc = block_loss(
            drafter, embed, head, feats[rows], tokens[rows], labels[rows], anchors
        )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        last = (loss.item(), acc.detach())
        progress(f"training (loss {last[0]:.3f})", step, cfg.steps)
        if step % cfg.save_every == 0 and step < cfg.steps:
            state = {
                "model": drafter.state_dict(),
                "optimizer": opt.state_dict(),
                "generator": gen.get_state(),
                "step": step,
            }
            checkpoint.save(name, KIND, state, meta, step=step, done=False)
    final = {"model": drafter.state_dict(), "loss": last[0], "accuracy": last[1].tolist()}
    return checkpoint.save(name, KIND, final, meta, step=step, done=True)


def _same_run(meta: dict[str, Any]) -> dict[str, Any]:
    """What a resumed run must share with the run it continues (--steps may grow)."""
    return {k: v for k, v in meta.items() if k != "steps"}


def summary(state: dict[str, Any]) -> str:
    acc = ", ".join(f"{a:.2f}" for a in state.get("accuracy", []))
    return f"last batch: loss {state.get('loss', float('nan')):.3f}, accuracy per position [{acc}]"
