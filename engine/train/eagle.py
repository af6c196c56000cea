"""Training an EAGLE head (engine/runtime/eagle_head.py) for a target into a named checkpoint
of kind "eagle" (engine/checkpoint.py), which decoding drafts with as `eagle:NAME`
(engine/runtime/eagle_format.py; every tree method, engine/draft/eagle.py).

Data: the stdlib corpus and the target's features over it, cached on disk once
(engine/train/eagle_data.py). The head starts from a seeded random initialisation, or from
another head (`init`: the paper trains with EAGLE's loss first, then continues with HASS or
TALF, Sec. 4.1). The target's embedding and LM head are frozen and shared; only the head's
fc and layer train.

Each step draws `batch` chunks (explicit generator) and minimises the chosen loss with AdamW:
`eagle` (engine/train/eagle_loss.py, Sec. 2.2: lambda_reg = 1 SmoothL1 on the features +
lambda_cls = 10 cross-entropy of the distributions, Sec. 4.1) or `hass` (engine/train/hass.py:
the same at `depth` = 3 steps with the head's own features fed back, plus lambda_distil = 10
top-K = 10 distillation) or `talf` (engine/train/eagle_talf.py, Algorithm 1: the target's
beam trees, k = `tree_k` = 4 and `depth` = 3, below `roots` roots per chunk, per-node
cross-entropy with the head's features fed back, no regression). Every
`save_every` steps the run is saved unfinished (weights, optimizer, step, generator), so
`resume` continues it exactly; `stop_after` stops early, leaving it resumable; the end saves
the head finished. The
checkpoint's config is this TrainConfig with the head's HeadConfig, the corpus's split record
and the feature file's sha256, recorded by every trial that drafts with it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Callable

import torch

from engine import checkpoint
from engine.config import ConfigError
from engine.models import load_model
from engine.runtime.eagle_format import EAGLE_PREFIX, KIND, load_head, save_folder
from engine.runtime.eagle_head import EagleHead, head_config, head_lm_head, shared_parts
from engine.train.eagle_data import build_corpus, cached_features
from engine.train.eagle_loss import LAMBDA_CLS, LAMBDA_REG, Parts, eagle_loss
from engine.train.eagle_talf import build_forests, eagle_talf_loss
from engine.train.hass import DEPTH, LAMBDA_DISTIL, TOP_K, hass_loss
from engine.train.talf import Forest, TALFConfig

LOSSES = ("eagle", "hass", "talf")
PRECISIONS = ("float32", "bfloat16")
Progress = Callable[[str, int, int], None]  # (phase, done, total)


@dataclass(frozen=True)
class TrainConfig:
    target: str = "tiny-llama"
    loss: str = "eagle"
    init: str | None = None  # a head to start from (eagle:NAME or eagle:PATH); None: random
    sequences: int = 32  # training chunks of the corpus
    seq_len: int = 128  # tokens per chunk
    steps: int = 200
    batch: int = 4  # chunks per step
    lr: float = 3e-3
    lambda_reg: float = LAMBDA_REG
    lambda_cls: float = LAMBDA_CLS
    depth: int = DEPTH  # HASS's steps, TALF's tree depth, the head's features fed back (3)
    top_k: int = TOP_K  # HASS: the top-K distillation's K (Sec. 2.2: 10)
    lambda_distil: float = LAMBDA_DISTIL  # HASS: its weight (Sec. 4.1: 10)
    tree_k: int = 4  # TALF: the target's beam trees' k (Sec. 4.1: 4)
    roots: int = 8  # TALF: roots (trees) per chunk per step
    save_every: int = 50
    seed: int = 0
    draft_vocab: int = 0  # > 0: the head drafts over the corpus's most frequent tokens
    precision: str = "float32"  # "bfloat16": the target's features and the head's forward

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise ConfigError(f"--loss {self.loss!r}: one of {', '.join(LOSSES)}")
        for k in ("sequences", "steps", "batch", "save_every"):
            if getattr(self, k) < 1:
                raise ConfigError(f"--{k.replace('_', '-')} must be >= 1, got {getattr(self, k)}")
        if min(self.depth, self.top_k, self.tree_k, self.roots) < 1:
            raise ConfigError("--depth, --top-k, --tree-k and --roots must be >= 1")
        if self.seq_len < self.depth + 2:
            raise ConfigError(f"--seq-len must be >= depth + 2 = {self.depth + 2}")
        if not self.lr > 0 or min(self.lambda_reg, self.lambda_cls, self.lambda_distil) < 0:
            raise ConfigError("--lr must be > 0, the loss weights (--lambda-*) >= 0")
        if self.draft_vocab < 0:
            raise ConfigError(f"--draft-vocab must be >= 0, got {self.draft_vocab}")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"--precision {self.precision!r}: one of {', '.join(PRECISIONS)}")
        if self.init is not None and not self.init.startswith(EAGLE_PREFIX):
            raise ConfigError(f"--init {self.init!r}: an EAGLE head, eagle:NAME or eagle:PATH")


def config_from(stored: dict[str, Any]) -> TrainConfig:
    """The TrainConfig of a checkpoint's stored config (its other keys left out)."""
    return TrainConfig(**{f.name: stored[f.name] for f in fields(TrainConfig) if f.name in stored})


def step_loss(cfg: TrainConfig, head, target_model, lm_head, tokens, feats, gen) -> Parts:
    """The configured loss on one batch (tokens [B, T], feats [B, T, H]); lm_head: the head's
    (head_lm_head with full=False); TALF's target trees are built here, their roots drawn
    with `gen`."""
    embed = shared_parts(target_model)[0]
    if cfg.loss == "talf":
        tree = TALFConfig(top_k=cfg.tree_k, depth=cfg.depth)
        forests = build_forests(target_model, tokens, cfg.roots, tree, gen)
        if head.vocab is not None:
            forests = [restrict_labels(f, head.vocab) for f in forests]
        return eagle_talf_loss(head, embed, lm_head, forests, list(feats))
    if cfg.loss == "hass":
        return hass_loss(
            head, embed, lm_head, tokens, feats, cfg.depth, cfg.top_k,
            cfg.lambda_reg, cfg.lambda_cls, cfg.lambda_distil,
        )  # fmt: skip
    return eagle_loss(head, embed, lm_head, tokens, feats, cfg.lambda_reg, cfg.lambda_cls)


def restrict_labels(forest: Forest, vocab: torch.Tensor) -> Forest:
    """TALF's soft labels [R, V] conditioned on the draft vocabulary vocab [Vd]: [R, Vd]."""
    labels = forest.labels[:, vocab.to(forest.labels.device)]
    return replace(forest, labels=labels / labels.sum(-1, keepdim=True).clamp_min(1e-30))


def frequent_tokens(tokens: torch.Tensor, size: int, vocab_size: int) -> torch.Tensor:
    """The `size` most frequent ids of tokens [S, T] (ties: the smaller id), ascending: a
    draft vocabulary (EAGLE-3 takes the most frequent tokens of its training data)."""
    counts = torch.bincount(tokens.flatten(), minlength=vocab_size)  # [V]
    order = torch.argsort(-counts, stable=True)[:size]
    return order.sort().values


def initial_head(cfg: TrainConfig, target_model, corpus_tokens: torch.Tensor) -> EagleHead:
    """A seeded random head for the target (its draft vocabulary, if any, the corpus's most
    frequent tokens), or the head `init` (checked against the target)."""
    shape = replace(head_config(target_model.config), draft_vocab_size=cfg.draft_vocab)
    if cfg.init is None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(cfg.seed)
            head = EagleHead(shape)
        if cfg.draft_vocab:
            head.set_vocab(frequent_tokens(corpus_tokens, cfg.draft_vocab, shape.vocab_size))
        return head
    head = load_head(cfg.init, torch.device("cpu"), torch.float32)["model"]
    if head.cfg != shape:
        raise ConfigError(
            f"--init {cfg.init}: a head of another shape (another target, or --draft-vocab "
            f"{head.cfg.draft_vocab_size}, not {cfg.draft_vocab})"
        )
    return head.requires_grad_(True)


def train(
    name: str,
    cfg: TrainConfig,
    resume: bool = False,
    progress: Progress | None = None,
    stop_after: int | None = None,
    device: str | None = None,
) -> checkpoint.Checkpoint:
    """Train (or with `resume`, continue) checkpoint `name` (see the module docstring) on
    `device` (None: the CPU): the target (fp32), the head and each step's batch live there;
    the cached features stay on the host."""
    progress = progress or (lambda phase, done, total: None)
    previous = checkpoint.resumable(name, KIND)
    if previous is not None and not resume:
        raise ConfigError(
            f"checkpoint {name!r} is unfinished (step {previous[0].step}): pass --resume to "
            "continue it, or choose another --name"
        )
    if resume and previous is None:
        raise ConfigError(f"--resume: no unfinished eagle checkpoint {name!r}")
    if previous is None and (checkpoint.folder(name) / "meta.json").exists():
        raise ConfigError(f"checkpoint {name!r} exists and is finished: choose another --name")
    if previous is not None:
        stored = config_from(previous[0].config)
        if {**asdict(stored), "steps": 0} != {**asdict(cfg), "steps": 0}:
            raise ConfigError(f"--resume {name!r}: flags other than --steps differ from the run")
    target = load_model(cfg.target, device=device or "cpu", dtype=cfg.precision)
    corpus = build_corpus(target.tokenizer, cfg.sequences, cfg.seq_len)
    feats, feature_record = cached_features(target.model, corpus.tokens, progress)
    head = initial_head(cfg, target.model, corpus.tokens).to(target.device)
    lm_head = head_lm_head(head, shared_parts(target.model)[1], full=False)
    autocast = torch.autocast(target.device.type, torch.bfloat16, cfg.precision == "bfloat16")
    meta = {
        **asdict(cfg),
        "head": head.cfg.to_dict(),
        "corpus": corpus.record(),
        "features": {k: feature_record[k] for k in ("sha256", "target_fingerprint", "shape")},
    }
    opt = torch.optim.AdamW(head.parameters(), lr=cfg.lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(cfg.seed)
    step = 0 if previous is None else checkpoint.restore(previous[1], head, opt, gen, "weights")
    head.train()
    tokens = corpus.tokens
    end = cfg.steps if stop_after is None else min(cfg.steps, stop_after)
    last: Parts | None = None
    while step < end:
        rows = torch.randint(0, cfg.sequences, (cfg.batch,), generator=gen)  # [B]
        batch = tokens[rows].to(target.device), feats[rows].to(target.device)  # [B, T], [B, T, H]
        with autocast:
            last = step_loss(cfg, head, target.model, lm_head, *batch, gen)
        opt.zero_grad(set_to_none=True)
        last.loss.backward()
        opt.step()
        step += 1
        progress(f"training (loss {last.loss.item():.3f})", step, cfg.steps)
        if step < cfg.steps and (step % cfg.save_every == 0 or step == end):
            state = {
                "weights": head.state_dict(),
                "head_config": head.cfg.to_dict(),
                "optimizer": opt.state_dict(),
                "generator": gen.get_state(),
                "step": step,
            }
            checkpoint.save(name, KIND, state, meta, step=step, done=False)
    if step < cfg.steps:  # stopped early: resumable
        return checkpoint.resumable(name, KIND)[0]
    final = {
        "weights": head.state_dict(),
        "head_config": head.cfg.to_dict(),
        "summary": {} if last is None else summary_of(last),
    }
    return checkpoint.save(name, KIND, final, meta, step=step, done=True)


def summary_of(parts: Parts) -> dict[str, float]:
    return {k: float(v.detach()) for k, v in parts._asdict().items()}


def summary(state: dict[str, Any]) -> str:
    s = state.get("summary", {})
    return (
        f"last batch: loss {s.get('loss', float('nan')):.3f} (reg {s.get('reg', float('nan')):.3f}"
        f", cls {s.get('cls', float('nan')):.3f}), top-1 agreement {s.get('accuracy', 0.0):.2f}"
    )


def export(name: str, out: str | Path, with_embedding: bool = False) -> Path:
    """The finished head `name` in the public EAGLE format at folder `out`
    (engine/runtime/eagle_format.py); with_embedding: with its target's embedding as
    embed_tokens.weight, which EAGLE's own (strict) loader expects."""
    ckpt = checkpoint.find(name, KIND)
    head = load_head(EAGLE_PREFIX + name, torch.device("cpu"), torch.float32)["model"]
    embed = None
    if with_embedding:
        target = load_model(ckpt.config["target"], device="cpu", dtype="float32")
        embed = shared_parts(target.model)[0].weight
    return save_folder(head, out, embed)
