"""The EAGLE draft head (EAGLE, Li et al. 2024; SALF & TALF paper Sec. 2.2): one decoder layer
of the target's family over the target's own features, drafting

    p(d)_{s+1}, f(d)_s <- D(x_{2:s}, f_{1:s-1})

Input row t pairs the token x_{t+1} with the feature f_t of the position before it (the target's
last-layer hidden state, or for a drafted node the head's own output at its parent). The head:

    h = fc([embed(x_{t+1}); f_t])          fc: Linear 2H -> H (with bias, as EAGLE's)
    h = h + attn(h)                         no input norm: EAGLE's layer 0 has none
    h = h + mlp(post_attention_layernorm(h))
    f(d)_{t+1} = h,   logits = lm_head(h)   the target's LM head, no final norm

The features are the target's final hidden states after its final norm (the LM head's input:
`hidden_states[-1]` of a Hugging Face forward, EAGLE's `outputs[0]`), so `lm_head(f)` are the
target's logits and the head's output lives in the same space. The embedding and the LM head
are the target's, shared and frozen: they are arguments of `forward`, never parameters of the
head, and never in its checkpoint. Parameter names are EAGLE's (`fc.*`, `layers.0.self_attn.*`,
`layers.0.mlp.*`, `layers.0.post_attention_layernorm.weight`), so a public EAGLE state dict
loads as it is (engine/runtime/eagle_format.py). Llama and Qwen2 differ only in the q/k/v
biases (`qkv_bias`).

`CachedHead` is the head with its KV cache (as engine/runtime/eager.py's CachedModel for an
LM): committed rows, then a tree's rows, compacted to the accepted ones.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn

from engine.clock import Clock
from engine.config import ConfigError

FAMILIES = ("llama", "qwen2")  # the targets' model_type a head is built for


@dataclass(frozen=True)
class HeadConfig:
    """The head's shape; the target's own numbers (the head's layer is one of its family's)."""

    family: str  # "llama" | "qwen2"
    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int  # the target's (its LM head's rows)
    rms_norm_eps: float = 1e-6
    rope_parameters: dict[str, Any] = field(
        default_factory=lambda: {"rope_type": "default", "rope_theta": 10000.0}
    )
    max_position_embeddings: int = 4096
    fc_bias: bool = True  # EAGLE's fc has a bias
    qkv_bias: bool = False  # Qwen2's attention projections have biases
    draft_vocab_size: int = 0  # > 0: drafts over that many target tokens (EAGLE-3's); 0: all

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ConfigError(
                f"an EAGLE head is built for a {' or '.join(FAMILIES)} target, not {self.family!r}"
            )
        if self.num_attention_heads % self.num_key_value_heads:
            raise ConfigError("num_attention_heads must be a multiple of num_key_value_heads")
        if not 0 <= self.draft_vocab_size <= self.vocab_size:
            raise ConfigError(
                f"draft_vocab_size must be in 0 .. vocab_size ({self.vocab_size}), "
                f"got {self.draft_vocab_size}"
            )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def model_type(self) -> str:
        """What a trial records as the draft's architecture (orchestrator/run/trial.py)."""
        return f"eagle-{self.family}"

    @property
    def num_hidden_layers(self) -> int:
        return 1


def head_config(target_config: Any) -> HeadConfig:
    """The head of a target with this Hugging Face config (Llama or Qwen2 family)."""
    family = getattr(target_config, "model_type", None)
    if family not in FAMILIES:
        raise ConfigError(
            f"an EAGLE head needs a {' or '.join(FAMILIES)} target; this one is {family!r}"
        )
    heads = target_config.num_attention_heads
    rope = getattr(target_config, "rope_parameters", None) or {
        "rope_type": "default",
        "rope_theta": float(getattr(target_config, "rope_theta", 10000.0)),
    }
    return HeadConfig(
        family=family,
        hidden_size=target_config.hidden_size,
        intermediate_size=target_config.intermediate_size,
        num_attention_heads=heads,
        num_key_value_heads=getattr(target_config, "num_key_value_heads", None) or heads,
        head_dim=getattr(target_config, "head_dim", None) or target_config.hidden_size // heads,
        vocab_size=target_config.vocab_size,
        rms_norm_eps=target_config.rms_norm_eps,
        rope_parameters=dict(rope),
        max_position_embeddings=target_config.max_position_embeddings,
        qkv_bias=family == "qwen2",
    )


class RMSNorm(nn.Module):
    """Llama's RMS norm (computed in fp32, scaled in the input's dtype)."""

    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


class Attention(nn.Module):
    def __init__(self, c: HeadConfig) -> None:
        super().__init__()
        q, kv = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
        self.q_proj = nn.Linear(c.hidden_size, q, bias=c.qkv_bias)
        self.k_proj = nn.Linear(c.hidden_size, kv, bias=c.qkv_bias)
        self.v_proj = nn.Linear(c.hidden_size, kv, bias=c.qkv_bias)
        self.o_proj = nn.Linear(q, c.hidden_size, bias=False)
        self.heads, self.kv_heads, self.dim = (
            c.num_attention_heads,
            c.num_key_value_heads,
            c.head_dim,
        )


class MLP(nn.Module):
    def __init__(self, c: HeadConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    """EAGLE's decoder layer (a Llama/Qwen2 layer without its input norm)."""

    def __init__(self, c: HeadConfig) -> None:
        super().__init__()
        self.self_attn = Attention(c)
        self.mlp = MLP(c)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE on x [B, heads, n, Dh] with cos/sin [B, n, Dh] (Llama's half rotation)."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos[:, None] + rotated * sin[:, None]


class EagleHead(nn.Module):
    """The head's parameters and its forward; see the module docstring."""

    def __init__(self, c: HeadConfig) -> None:
        super().__init__()
        from transformers import LlamaConfig  # lazy: transformers
        from transformers.models.llama.modeling_llama import (  # lazy: transformers
            LlamaRotaryEmbedding,
        )

        self.cfg = c
        self.fc = nn.Linear(2 * c.hidden_size, c.hidden_size, bias=c.fc_bias)
        self.layers = nn.ModuleList([Layer(c)])
        rope_config = LlamaConfig(
            hidden_size=c.hidden_size,
            num_attention_heads=c.num_attention_heads,
            head_dim=c.head_dim,
            max_position_embeddings=c.max_position_embeddings,
            rope_parameters=dict(c.rope_parameters),
        )
        self.rotary = LlamaRotaryEmbedding(rope_config)  # Qwen2's RoPE is Llama's
        self.vocab_heads: dict[tuple[int, bool], nn.Module] = {}  # head_lm_head's, by LM head
        if c.draft_vocab_size:  # EAGLE-3's draft vocabulary, in its buffers' convention
            # d2t [Vd]: draft id d is target id d + d2t[d]; t2d [V]: a target id is drafted.
            # Set from the training corpus (set_vocab) or loaded with the head's tensors.
            self.register_buffer("d2t", torch.zeros(c.draft_vocab_size, dtype=torch.long))
            self.register_buffer("t2d", torch.zeros(c.vocab_size, dtype=torch.bool))
            self.set_vocab(torch.arange(c.draft_vocab_size))

    @property
    def vocab(self) -> torch.Tensor | None:
        """The target ids the head drafts over, ascending [Vd] (None: the whole vocabulary)."""
        if not self.cfg.draft_vocab_size:
            return None
        return torch.arange(self.cfg.draft_vocab_size, device=self.d2t.device) + self.d2t

    def set_vocab(self, ids: torch.Tensor) -> None:
        """Draft over the target ids `ids` [Vd] (distinct; stored ascending)."""
        ids = torch.unique(ids.to(torch.long).cpu())  # sorted
        if ids.numel() != self.cfg.draft_vocab_size or not 0 <= int(ids[0]):
            raise ConfigError(f"a draft vocabulary of {self.cfg.draft_vocab_size} distinct ids")
        if int(ids[-1]) >= self.cfg.vocab_size:
            raise ConfigError(f"draft vocabulary ids must be < {self.cfg.vocab_size}")
        self.d2t.copy_(ids - torch.arange(ids.numel()))
        self.t2d.zero_()
        self.t2d[ids.to(self.t2d.device)] = True
        self.vocab_heads.clear()  # their rows were the old vocabulary's

    @property
    def config(self) -> Any:
        """What a loaded model's `config` answers (engine/models.py's vocabulary check)."""
        return self.cfg

    @property
    def device(self) -> torch.device:
        return self.fc.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.fc.weight.dtype

    def forward(
        self,
        embeds: torch.Tensor,
        feats: torch.Tensor,
        positions: torch.Tensor,
        visible: torch.Tensor | None = None,
        past: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """The head over n rows after `past` keys/values: (features out [B, n, H], this
        call's (keys, values) [B, kv_heads, n, Dh] each, after RoPE).

        embeds, feats: [B, n, H] the tokens' embeddings and the features paired with them;
        positions: [B, n]; visible: [B, n, S + n] bool over past then new rows (None: causal
        over the new rows, every past row seen); past: keys/values [B, kv_heads, S, Dh]."""
        layer = self.layers[0]
        attn = layer.self_attn
        h = self.fc(torch.cat([embeds, feats], -1))  # [B, n, H]
        b, n, _ = h.shape
        q = attn.q_proj(h).view(b, n, attn.heads, attn.dim).transpose(1, 2)  # [B, Hq, n, Dh]
        k = attn.k_proj(h).view(b, n, attn.kv_heads, attn.dim).transpose(1, 2)  # [B, Hkv, n, Dh]
        v = attn.v_proj(h).view(b, n, attn.kv_heads, attn.dim).transpose(1, 2)
        cos, sin = self.rotary(h, positions)  # [B, n, Dh] each
        q, k = (
            rotate(q, cos.to(q.dtype), sin.to(q.dtype)),
            rotate(k, cos.to(k.dtype), sin.to(k.dtype)),
        )
        keys = k if past is None else torch.cat([past[0], k], 2)  # [B, Hkv, S + n, Dh]
        values = v if past is None else torch.cat([past[1], v], 2)
        if visible is None:
            s = keys.shape[2] - n
            visible = torch.ones(n, s + n, dtype=torch.bool, device=h.device)
            visible[:, s:] = torch.ones(n, n, dtype=torch.bool, device=h.device).tril()
            visible = visible[None].expand(b, n, s + n)
        groups = attn.heads // attn.kv_heads
        out = nn.functional.scaled_dot_product_attention(
            q,
            keys.repeat_interleave(groups, 1),
            values.repeat_interleave(groups, 1),
            attn_mask=visible[:, None],  # [B, 1, n, S + n]
            scale=1.0 / math.sqrt(attn.dim),
        )  # [B, Hq, n, Dh]
        h = h + attn.o_proj(out.transpose(1, 2).reshape(b, n, attn.heads * attn.dim))
        h = h + layer.mlp(layer.post_attention_layernorm(h))
        return h, (k, v)


def shared_parts(target_model: Any) -> tuple[nn.Module, nn.Module]:
    """The target's embedding and LM head, which the head shares (frozen, never copied)."""
    return target_model.get_input_embeddings(), target_model.get_output_embeddings()


class DraftVocabLMHead(nn.Module):
    """The target's LM head restricted to a head's draft vocabulary (EAGLE-3's reduced
    vocabulary, our variant of the EAGLE head): its rows `vocab` [Vd] (a frozen copy, made
    once; an LM head other than a plain Linear, e.g. a check's view, is run whole and its
    logits restricted). `full`: logits over the target's V ids, -inf where the head never
    drafts, which is what the tree builders and verifiers read (the draft's probability there
    is 0); else the Vd restricted logits (training: softmax over them is the distribution
    conditioned on the draft vocabulary, as EAGLE-3 trains)."""

    def __init__(self, lm_head: nn.Module, vocab: torch.Tensor, full: bool) -> None:
        super().__init__()
        self.vocab = vocab.to(lm_head.weight.device)
        self.linear = type(lm_head) is nn.Linear and lm_head.bias is None
        self.weight = lm_head.weight.detach()
        if self.linear:
            self.weight = self.weight.index_select(0, self.vocab)  # [Vd, H]
        self.other = [lm_head]  # a list: not a submodule
        self.full = full

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.linear:
            logits, size = nn.functional.linear(x, self.weight), self.other[0].out_features
        else:
            whole = self.other[0](x)  # [..., V]
            logits, size = whole[..., self.vocab], whole.shape[-1]
        if not self.full:
            return logits  # [..., Vd]
        out = logits.new_full((*logits.shape[:-1], size), float("-inf"))  # [..., V]
        out[..., self.vocab] = logits
        return out


def head_lm_head(head: EagleHead, lm_head: nn.Module, full: bool = True) -> nn.Module:
    """What maps the head's output features to its logits: the target's LM head, or with a
    draft vocabulary its restriction (DraftVocabLMHead; `full` as there)."""
    if not head.cfg.draft_vocab_size:
        return lm_head
    # made once per (LM head, form): every generation's CachedHead would copy the rows again
    key = (id(lm_head), full)
    if key not in head.vocab_heads:
        head.vocab_heads[key] = DraftVocabLMHead(lm_head, head.vocab, full)
    return head.vocab_heads[key]


class CachedHead:
    """An EagleHead with its KV cache over committed rows then a tree's rows, the target's
    embedding and LM head beside it; the `lm` of engine/draft/eagle.py EagleDraft (the
    counters and clock a draft's `lm` keeps for a generation's stats, as CachedModel)."""

    fast = False  # the eager path: the fast paths (chain, static trees) need a draft LM
    padded = False

    def __init__(self, head: EagleHead, target_model: Any) -> None:
        self.head = head
        self.embed, lm_head = shared_parts(target_model)
        self.lm_head = head_lm_head(head, lm_head)
        self.device, self.dtype = head.device, head.dtype
        self.keys: torch.Tensor | None = None  # [1, Hkv, length, Dh]
        self.values: torch.Tensor | None = None
        self.committed = 0  # leading rows that hold committed tokens
        self.use_clock(Clock(self.device))
        self.forward_calls = 0
        self.forward_tokens = 0

    def use_clock(self, clock: Clock) -> None:
        self.clock = clock
        self.spans: list[tuple[int, int]] = []

    @property
    def length(self) -> int:
        return 0 if self.keys is None else self.keys.shape[2]

    def forward(
        self,
        tokens: torch.Tensor,
        feats: torch.Tensor,
        positions: torch.Tensor,
        visible: torch.Tensor,
        keep: int = 0,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append n rows: tokens [n], feats [n, H], positions [n], visible [n, length + n];
        returns the output features [n, H] and the logits of the last `keep` rows [keep, V]
        (keep=0: all)."""
        n = tokens.shape[0]
        start = self.clock.stamp()
        embeds = self.embed(tokens).to(self.dtype)[None]  # [1, n, H]
        past = None if self.keys is None else (self.keys, self.values)
        out, (k, v) = self.head(
            embeds, feats.to(self.dtype)[None], positions[None], visible[None], past
        )
        self.keys = k if self.keys is None else torch.cat([self.keys, k], 2)
        self.values = v if self.values is None else torch.cat([self.values, v], 2)
        rows = out[0] if not keep else out[0, n - keep :]  # [keep, H]
        logits = self.lm_head(rows.to(self.lm_head.weight.dtype)).float()  # [keep, V]
        self.spans.append((start, self.clock.stamp()))
        self.forward_calls += 1
        self.forward_tokens += n
        return out[0], logits

    def commit(self, slots: list[int]) -> None:
        """Keep the committed rows then the rows `slots` (ascending), now committed too."""
        if self.keys is None:
            return
        n = self.committed + len(slots)
        if list(slots) == list(range(self.committed, n)):  # in place already: crop
            self.keys, self.values = self.keys[:, :, :n], self.values[:, :, :n]
        else:
            keep = list(range(self.committed)) + list(slots)
            index = torch.tensor(keep, dtype=torch.long, device=self.keys.device)
            self.keys = self.keys.index_select(2, index)
            self.values = self.values.index_select(2, index)
        self.committed = n
