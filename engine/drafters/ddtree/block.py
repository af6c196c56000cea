"""The block-diffusion drafter of DDTree (Ringel & Romano 2026, "ddtree.txt"), after DFlash.

One forward of this drafter gives the marginals q_1..q_L of the next L positions (Sec. 3): the
drafter reads the masked block [b, m, .., m] (the bonus token b, then L mask tokens) and the
target's hidden states of the context c, and predicts every masked position in parallel, each
from the shared (c, b) and never from the tokens placed at earlier block positions (Eq. 2,
the factorised Q that DDTree's best-first tree maximises). As in DFlash (Sec. 2, [6]: "a small
block diffusion drafter, conditioned on target-model features"), the context enters as
features only: the target's hidden states of the committed tokens before b, a few of its
layers concatenated and projected (`fc`), become the keys and values every drafter layer
attends to beside the block; b has no target features yet (Sec. 3: "the target model has not
yet been run on b"). Attention inside the block is bidirectional (block diffusion), rotary
positions are absolute (context 0..P-1, block P..P+L). The target's token embedding (for b)
and LM head (for the marginals) are reused frozen; the mask token's embedding is learned.

Shapes: D the target's hidden size (the drafter runs at D so that the embedding and the head
fit), F = D * len(target_layers) the concatenated features, L the block size, C the context.

The drafter at decoding time (its context's keys/values, one forward per round giving the
marginals DDTree's builder reads): block_context.py. Training: block_drafter_train.py.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from engine.checkpoint import find, load
from engine.config import ConfigError

KIND = "block-drafter"


@dataclass(frozen=True)
class BlockDrafterConfig:
    hidden: int  # D, the target's hidden size
    vocab: int  # the target's vocabulary (LM head rows)
    target_layers: tuple[int, ...]  # indices into the target's hidden_states (0: embeddings)
    block_size: int = 8  # L, masked positions per forward
    layers: int = 2  # drafter transformer layers
    heads: int = 4
    intermediate: int = 0  # MLP width; 0: 2 * hidden
    rope_theta: float = 10000.0

    def __post_init__(self) -> None:
        if self.hidden % self.heads or (self.hidden // self.heads) % 2:
            raise ConfigError(f"hidden {self.hidden} must split into {self.heads} even heads")
        if self.block_size < 1 or self.layers < 1 or not self.target_layers:
            raise ConfigError("block_size and layers must be >= 1, target_layers non-empty")

    @property
    def features(self) -> int:  # F
        return self.hidden * len(self.target_layers)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["target_layers"] = list(self.target_layers)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "BlockDrafterConfig":
        return cls(**{**d, "target_layers": tuple(d["target_layers"])})


def rope(x: torch.Tensor, pos: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotary embedding of x [..., S, H, Dh] at positions pos [..., S] (rotate-half form)."""
    half = x.shape[-1] // 2
    freq = theta ** (-torch.arange(half, device=x.device, dtype=torch.float32) / half)  # [Dh/2]
    ang = (pos.float()[..., None] * freq)[..., None, :]  # [..., S, 1, Dh/2]
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Layer(nn.Module):
    """Pre-norm transformer layer whose attention reads context keys/values beside the block."""

    def __init__(self, cfg: BlockDrafterConfig) -> None:
        super().__init__()
        d, width = cfg.hidden, cfg.intermediate or 2 * cfg.hidden
        self.heads, self.theta = cfg.heads, cfg.rope_theta
        self.norm1, self.norm2 = nn.RMSNorm(d), nn.RMSNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.gate, self.up = nn.Linear(d, width, bias=False), nn.Linear(d, width, bias=False)
        self.down = nn.Linear(width, d, bias=False)

    def split(self, x: torch.Tensor) -> torch.Tensor:  # [B, S, D] -> [B, S, H, Dh]
        return x.view(*x.shape[:-1], self.heads, -1)

    def context_kv(self, ctx: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Keys and values [B, C, H, Dh] of projected context features ctx [B, C, D]."""
        return rope(self.split(self.k(ctx)), pos, self.theta), self.split(self.v(ctx))

    def forward(self, x, pos, k_ctx, v_ctx, mask) -> torch.Tensor:
        """x [B, Q, D] block states at pos [B, Q]; k_ctx, v_ctx [B, C, H, Dh]; mask
        [B, Q, C + Q] bool (True: attend). Returns [B, Q, D]."""
        h = self.norm1(x)
        q = rope(self.split(self.q(h)), pos, self.theta)  # [B, Q, H, Dh]
        k = torch.cat([k_ctx, rope(self.split(self.k(h)), pos, self.theta)], 1)  # [B, C+Q, H, Dh]
        v = torch.cat([v_ctx, self.split(self.v(h))], 1)
        att = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask[:, None]
        )  # [B, H, Q, Dh]
        x = x + self.o(att.transpose(1, 2).flatten(2))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class BlockDrafter(nn.Module):
    """The trainable part; the target's embedding and head are passed in, frozen."""

    def __init__(self, cfg: BlockDrafterConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.fc = nn.Linear(cfg.features, cfg.hidden, bias=False)  # fuse the target's layers
        self.ctx_norm = nn.RMSNorm(cfg.hidden)
        self.mask_embedding = nn.Parameter(torch.randn(cfg.hidden) * 0.02)
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg.layers))
        self.norm = nn.RMSNorm(cfg.hidden)

    def project(self, feats: torch.Tensor) -> torch.Tensor:
        """Target features [B, C, F] -> context states [B, C, D]."""
        return self.ctx_norm(self.fc(feats))

    def block_input(self, bonus_emb: torch.Tensor) -> torch.Tensor:
        """[B, D] embedding of b -> the masked block [B, 1 + L, D]: b, then L mask tokens."""
        masks = self.mask_embedding.expand(bonus_emb.shape[0], self.cfg.block_size, -1)
        return torch.cat([bonus_emb[:, None], masks.to(bonus_emb.dtype)], 1)

    def forward(self, block, pos, ctx_kv, mask) -> torch.Tensor:
        """block [B, Q, D] at pos [B, Q]; ctx_kv: per layer (k, v) [B, C, H, Dh]; mask
        [B, Q, C + Q]. Returns the final states [B, Q, D] (LM head not applied)."""
        x = block
        for layer, (k, v) in zip(self.layers, ctx_kv):
            x = layer(x, pos, k, v, mask)
        return self.norm(x)


def target_parts(model) -> tuple[nn.Module, nn.Module]:
    """The target's token embedding and LM head (frozen, shared with the drafter)."""
    return model.get_input_embeddings(), model.get_output_embeddings()


def target_fingerprint(model) -> str:
    """Which target a drafter was trained on (its features and head are that model's):
    architecture, sizes and the first LM-head rows, hashed."""
    mc = model.config
    head = target_parts(model)[1].weight[:4].detach().float().cpu().contiguous()
    sizes = f"{mc.model_type}/{mc.hidden_size}/{mc.vocab_size}/{mc.num_hidden_layers}"
    return hashlib.sha256(sizes.encode() + head.numpy().tobytes()).hexdigest()[:16]


def default_target_layers(num_layers: int) -> tuple[int, ...]:
    """The middle and the last layer's states (hidden_states[i], 0: embeddings): features from
    across the target's depth, as DFlash fuses several layers (Sec. 2)."""
    return tuple(sorted({max(1, num_layers // 2), num_layers}))


def load_drafter(name: str, model) -> BlockDrafter:
    """The finished block-drafter checkpoint `name` for target `model`, in eval mode on its
    device and dtype; ConfigError (one line) if it is missing or made for another target."""
    ckpt, state = load(name, KIND)
    cfg = BlockDrafterConfig.from_dict(ckpt.config["drafter"])
    if ckpt.config.get("target_fingerprint") != target_fingerprint(model):
        raise ConfigError(
            f"checkpoint {name!r} was trained for target {ckpt.config.get('target')!r} "
            f"(hidden {cfg.hidden}, vocabulary {cfg.vocab}), not this one"
        )
    drafter = BlockDrafter(cfg)
    drafter.load_state_dict(state["model"])
    return drafter.to(model.device, model.dtype).eval().requires_grad_(False)


_LOADED: dict[tuple[str, str, int], BlockDrafter] = {}  # (name, sha256, id(target)) -> drafter


def cached_drafter(name: str, model) -> BlockDrafter:
    """load_drafter once per process, checkpoint version and target model."""
    key = (name, find(name, KIND).sha256, id(model))
    if key not in _LOADED:
        _LOADED.clear()  # one drafter at a time, as the trial's pair cache
        _LOADED[key] = load_drafter(name, model)
    return _LOADED[key]


def block_loss(
    drafter: BlockDrafter,
    embed: nn.Module,
    head: nn.Module,
    feats: torch.Tensor,
    tokens: torch.Tensor,
    labels: torch.Tensor,
    anchors: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy of the block marginals on one batch, all anchors in one forward.

    feats [B, T, F] target features of sequences tokens [B, T]; labels [B, T] the token to
    predict after each position; anchors [B, n] positions a of the bonus tokens b = tokens[a]
    (1 <= a <= T - L). Block position i (1..L) of anchor a predicts labels[a + i - 1] and sees
    the features of positions < a (what decoding has when b is the root) and its own block.
    Returns the mean loss and the top-1 accuracy per block position [L].
    """
    cfg = drafter.cfg
    bsz, t = tokens.shape
    n, blk = anchors.shape[1], 1 + cfg.block_size
    ctx = drafter.project(feats)  # [B, T, D]
    ctx_pos = torch.arange(t, device=feats.device).expand(bsz, t)  # [B, T]
    kv = [layer.context_kv(ctx, ctx_pos) for layer in drafter.layers]
    bonus = embed(tokens.gather(1, anchors)).flatten(0, 1)  # [B * n, D]
    block = drafter.block_input(bonus).view(bsz, n * blk, -1)  # [B, n * (1 + L), D]
    offs = torch.arange(blk, device=feats.device)
    pos = (anchors[..., None] + offs).flatten(1)  # [B, n * (1 + L)]
    anchor_of = anchors.repeat_interleave(blk, 1)  # [B, Q]
    sees_ctx = torch.arange(t, device=feats.device) < anchor_of[..., None]  # [B, Q, T]
    group = torch.arange(n, device=feats.device).repeat_interleave(blk)  # [Q]
    same_block = (group[:, None] == group[None, :]).expand(bsz, -1, -1)  # [B, Q, Q]
    out = drafter(block, pos, kv, torch.cat([sees_ctx, same_block], -1))  # [B, Q, D]
    masked = out.view(bsz, n, blk, -1)[:, :, 1:]  # [B, n, L, D]
    target_idx = anchors[..., None] + offs[:-1]  # [B, n, L] label positions a .. a + L - 1
    gold = labels.gather(1, target_idx.flatten(1)).view(bsz, n, cfg.block_size)
    logits = head(masked).float()  # [B, n, L, V]
    loss = F.cross_entropy(logits.flatten(0, 2), gold.flatten())
    acc = (logits.argmax(-1) == gold).float().mean((0, 1))  # [L]
    return loss, acc


def param_count(drafter: BlockDrafter) -> int:
    return sum(p.numel() for p in drafter.parameters())
