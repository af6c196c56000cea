"""Training a draft model with TALF (engine/train/talf.py) or standard distillation
(engine/train/distill.py) into a checkpoint of kind "talf", and loading it back by name.

What is trained (`train_layers`): a copy of the draft LM whose last `train_layers` decoder
layers and final norm are trainable; the embeddings, the LM head (tied to the embeddings in
Qwen2.5-0.5B) and every earlier layer stay frozen. Why: the paper trains a one-layer EAGLE head
on features of the target (Sec. 2.2), which this engine's drafts do not have; the issue allows
"a small 2-4 layer drafter for the real target". Training the top of the real 0.5B draft keeps
the draft the engine already decodes with (same vocabulary, same caches, greedy output still
the target's), needs no new architecture, and on the CPU costs one frozen forward plus the
backward of a few layers: the frozen part keeps no activations for backward. The checkpoint
holds only the trained tensors (Qwen2.5-0.5B, 2 layers + norm: 30M of 494M parameters).

Data (App. D: "trained the draft model to predict the target model's outputs"): each training
sequence is a prompt of `dataset` (the first `prompts` after `prompt_offset`; the rest are
held out for evaluation) followed by the target's own greedy continuation of
`response_tokens` tokens; a step takes one sequence and `roots` positions of its response as
roots (the whole sequence when response_tokens is 0). The target builds each step's trees and
labels right before the step (the paper precomputes them once to reuse them over epochs; with
one pass over the data it is the same computation, and nothing large is kept).

Optimizer (App. D): AdamW, betas (0.9, 0.95), learning rate 3e-4, linear warm-up then cosine
annealing to zero. Every step is seeded from (seed, step), so a run resumed from a checkpoint
(optimizer state and step saved every `save_every` steps) makes the same steps as one that
never stopped.

A trained draft is a model name: `ckpt:NAME` (engine/models.py) loads the checkpoint's base
draft and puts the trained tensors in, e.g. `orch generate --draft ckpt:talf-q05 --method salf`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any, Callable

import torch

from engine import checkpoint
from engine.checkpoint import apply_weights
from engine.datasets import encode_prompt, load_prompts
from engine.decode import generate
from engine.drafters import AUTOREGRESSIVE
from engine.models import Pair, load_model
from engine.train.distill import distill_loss, target_labels
from engine.train.talf import TALFConfig, talf_loss, target_forest

KIND = "talf"
LOSSES = ("talf", "distill")


@dataclass(frozen=True)
class TrainConfig:
    target: str = "qwen2.5-coder-1.5b"
    draft: str = "qwen2.5-coder-0.5b"
    target_dtype: str = "auto"  # the target only labels: bf16 halves its memory (auto: fp32 on CPU)
    loss: str = "talf"  # talf (Algorithm 1) | distill (Sec. 2.2 L_cls, the baseline)
    top_k: int = 4  # TALF tree: k (Sec. 4.1)
    depth: int = 3  # TALF tree depth (Sec. 4.1, App. D)
    train_layers: int = 2  # trainable last decoder layers (+ final norm), see module doc
    steps: int = 100
    roots: int = 8  # roots (trees) per step, from one sequence
    lr: float = 3e-4  # App. D
    warmup: int = 10  # linear warm-up steps before the cosine (App. D: "with a warm-up")
    dataset: str = "humaneval"
    prompts: int = 100  # training prompts
    prompt_offset: int = 0  # skip this many prompts first
    prompt_tokens: int = 256  # truncate each prompt to its last N tokens
    response_tokens: int = 32  # target's greedy continuation appended to each prompt
    save_every: int = 10
    seed: int = 0

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {', '.join(LOSSES)}, got {self.loss!r}")
        for f in ("top_k", "depth", "train_layers", "steps", "roots", "prompts", "save_every"):
            if getattr(self, f) < 1:
                raise ValueError(f"{f} must be >= 1, got {getattr(self, f)}")
        for f in ("warmup", "prompt_offset", "response_tokens"):
            if getattr(self, f) < 0:
                raise ValueError(f"{f} must be >= 0, got {getattr(self, f)}")
        if self.prompt_tokens < 2:
            raise ValueError(f"prompt_tokens must be >= 2, got {self.prompt_tokens}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")


def config_from(d: dict[str, Any]) -> TrainConfig:
    names = {f.name for f in fields(TrainConfig)}
    return TrainConfig(**{k: v for k, v in d.items() if k in names})


def trainable(model, train_layers: int) -> dict[str, torch.nn.Parameter]:
    """The trained parameters by name: the last `train_layers` decoder layers and the final
    norm of a Llama/Qwen2 (`model.layers`, `model.norm`) or GPT-NeoX (`gpt_neox.layers`,
    `gpt_neox.final_layer_norm`) causal LM."""
    base = model.base_model
    prefix = model.base_model_prefix
    n = len(base.layers)
    if train_layers > n:
        raise ValueError(f"train_layers {train_layers} > the draft's {n} layers")
    keep = [f"{prefix}.layers.{i}." for i in range(n - train_layers, n)]
    keep += [f"{prefix}.{norm}." for norm in ("norm", "final_layer_norm") if hasattr(base, norm)]
    return {k: p for k, p in model.named_parameters() if any(k.startswith(s) for s in keep)}


def learning_rate(cfg: TrainConfig, step: int) -> float:
    """App. D: linear warm-up over `warmup` steps, then cosine annealing to 0 at `steps`."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    done = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * 0.5 * (1.0 + math.cos(math.pi * done))


def _gen(cfg: TrainConfig, *key: int) -> torch.Generator:
    seed = cfg.seed
    for k in key:
        seed = (seed * 1_000_003 + k) % (2**63)
    return torch.Generator().manual_seed(seed)


# (target, dataset, prompt index, prompt_tokens, response_tokens) -> (tokens, first root):
# greedy continuations are deterministic, so runs in one process (TALF and its distillation
# baseline on the same data) generate each one once
_MADE: dict[tuple, tuple[list[int], int]] = {}


class Sequences:
    """The training sequences, each made the first time a step needs it: the prompt's last
    `prompt_tokens` tokens, then the target's greedy continuation (`response_tokens`)."""

    def __init__(self, cfg: TrainConfig, target, tokenizer) -> None:
        all_prompts = load_prompts(cfg.dataset, cfg.prompt_offset + cfg.prompts)
        self.prompts = all_prompts[cfg.prompt_offset :]
        self.cfg, self.target, self.tokenizer = cfg, target, tokenizer

    def __len__(self) -> int:
        return len(self.prompts)

    def get(self, i: int) -> tuple[list[int], int]:
        """(tokens, first root): roots are positions first_root .. len - 2 (each has the next
        token of the sequence after it; with a response, those whose next token the target
        wrote)."""
        cfg = self.cfg
        key = (self.target.name, cfg.dataset, cfg.prompt_offset + i, cfg.prompt_tokens)
        key += (cfg.response_tokens,)
        if key not in _MADE:
            ids = encode_prompt(self.tokenizer, self.prompts[i], cfg.prompt_tokens)
            first = 0
            if cfg.response_tokens:
                pair = Pair(target=self.target, draft=None)
                out = generate(pair, ids, AUTOREGRESSIVE, cfg.response_tokens).tokens
                first, ids = len(ids) - 1, ids + list(out)
            _MADE[key] = (ids, first)
        return _MADE[key]


def step_batch(cfg: TrainConfig, seqs: Sequences, step: int) -> tuple[list[int], list[int]]:
    """Step `step`'s sequence and roots: sequences in a fresh random order every epoch, roots
    drawn without replacement from the sequence's root positions."""
    epoch, i = divmod(step, len(seqs))
    order = torch.randperm(len(seqs), generator=_gen(cfg, 0, epoch))
    seq, first = seqs.get(int(order[i]))
    span = max(1, len(seq) - 1 - first)  # positions first .. len - 2
    pick = torch.randperm(span, generator=_gen(cfg, 1, step))[: cfg.roots] + first
    return seq, sorted(pick.tolist())


def train(
    cfg: TrainConfig,
    name: str,
    resume: bool = False,
    stop_after: int | None = None,
    device: str | None = None,
    on_step: Callable[[int, float], None] | None = None,
    models: tuple[Any, Any] | None = None,
) -> checkpoint.Checkpoint:
    """Train the draft of `cfg` with its loss into checkpoint `name` (resume: from the
    unfinished checkpoint `name`). stop_after: stop after that many steps in total, leaving
    the checkpoint unfinished (resumable). on_step(step, loss) after every step.
    models: (target, draft) already loaded (LoadedModel) as `cfg` names them, instead of
    loading them; the draft's trained tensors are then changed in place."""
    saved = checkpoint.resumable(name, KIND) if resume else None
    if resume and saved is None:
        raise ValueError(f"no unfinished {KIND} checkpoint {name!r} to resume")
    if models is None:
        target = load_model(cfg.target, device, cfg.target_dtype)
        draft = load_model(cfg.draft, device)
    else:
        target, draft = models
    params = trainable(draft.model, cfg.train_layers)
    for p in params.values():
        p.requires_grad_(True)
    opt = torch.optim.AdamW(list(params.values()), lr=cfg.lr, betas=(0.9, 0.95))
    start = 0
    if saved is not None:
        state = saved[1]
        apply_weights(draft.model, state["weights"])
        opt.load_state_dict(state["optimizer"])
        start = int(state["step"])
    seqs = Sequences(cfg, target, target.tokenizer)
    tree_cfg = TALFConfig(cfg.top_k, cfg.depth)
    record = {**asdict(cfg), "trainable": sorted(params)}
    end = cfg.steps if stop_after is None else min(cfg.steps, stop_after)

    def save(step: int, done: bool) -> checkpoint.Checkpoint:
        weights = {k: p.detach().cpu().clone() for k, p in params.items()}
        state = {"weights": weights, "step": step, "seed": cfg.seed}
        if not done:
            state["optimizer"] = opt.state_dict()
        return checkpoint.save(name, KIND, state, record, step, done)

    ckpt = None
    for step in range(start, end):
        seq, roots = step_batch(cfg, seqs, step)
        for g in opt.param_groups:
            g["lr"] = learning_rate(cfg, step)
        if cfg.loss == "talf":
            loss = talf_loss(draft.model, target_forest(target.model, seq, roots, tree_cfg))
        else:
            loss = distill_loss(draft.model, target_labels(target.model, seq, roots))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if on_step is not None:
            on_step(step, loss.item())
        if step + 1 < cfg.steps and ((step + 1) % cfg.save_every == 0 or step + 1 == end):
            ckpt = save(step + 1, done=False)
    if end == cfg.steps:
        ckpt = save(cfg.steps, done=True)
    for p in params.values():
        p.requires_grad_(False)
    if ckpt is None:  # resumed with no step left before stop_after
        ckpt = saved[0] if saved is not None else checkpoint.find(name, KIND)
    return ckpt
