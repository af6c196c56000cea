"""An EAGLE head (engine/runtime/eagle_head.py) seen as a draft LM by the measurements that read
a draft that way: its teacher-forced logits along a sequence (Sequoia's acceptance profile,
engine/drafters/sequoia/profile.py) and its forwards timed as CachedModel's (forward-cost
curves, engine/curves.py)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from engine.runtime.eagle_head import (
    CachedHead,
    EagleHead,
    HeadConfig,
    head_lm_head,
    shared_parts,
)


def teacher_forced_logits(head: EagleHead, target_model: Any, input_ids: torch.Tensor):
    """The head's logits along a sequence input_ids [1, T], teacher-forced on the target's
    features (one target forward): [1, T, V], row t the head's distribution of the token after
    x_t, what it drafts below a root x_t; row 0 (no feature before x_0) zeros, a uniform row.
    For measurements that read a draft as a causal LM (Sequoia's acceptance profile)."""
    out = target_model(input_ids=input_ids, output_hidden_states=True)
    feats = out.hidden_states[-1].to(head.dtype)  # [1, T, H] after the final norm
    embed, lm_head = shared_parts(target_model)
    lm_head = head_lm_head(head, lm_head)
    t = input_ids.shape[1]
    positions = torch.arange(t - 1, device=input_ids.device)[None]  # [1, T-1]
    rows, _ = head(embed(input_ids[:, 1:]).to(head.dtype), feats[:, :-1], positions)
    logits = lm_head(rows.to(lm_head.weight.dtype)).float()  # [1, T-1, V]
    return torch.cat([torch.zeros_like(logits[:, :1]), logits], 1)  # [1, T, V]


class StandIns(nn.Module):
    """A target's embedding and LM head in shape only (random), to time a head alone."""

    def __init__(self, c: HeadConfig, device: torch.device, dtype: torch.dtype) -> None:
        super().__init__()
        self.embed = nn.Embedding(c.vocab_size, c.hidden_size, device=device, dtype=dtype)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, False, device=device, dtype=dtype)

    def get_input_embeddings(self) -> nn.Module:
        return self.embed

    def get_output_embeddings(self) -> nn.Module:
        return self.lm_head


class HeadAsLM:
    """A CachedHead answering CachedModel's `forward(tokens, positions, visible)`, `extend` and
    `commit`, its input features zeros (a forward's cost does not depend on them), over stand-in
    embedding and LM head of the target's shapes: what engine/curves.py times for an EAGLE
    draft's forward-cost curve (fc, the layer and the LM head, as a drafting forward runs)."""

    def __init__(self, head: EagleHead) -> None:
        self.cached = CachedHead(head, StandIns(head.cfg, head.device, head.dtype))
        self.device = head.device
        self.hidden = head.cfg.hidden_size

    @property
    def committed(self) -> int:
        return self.cached.committed

    def forward(self, tokens, positions, visible=None, keep: int = 0) -> torch.Tensor:
        n, length = tokens.shape[0], self.cached.length
        if visible is None:
            visible = torch.ones(n, length + n, dtype=torch.bool, device=self.device)
            visible[:, length:] = torch.ones(n, n, device=self.device).tril().bool()
        feats = torch.zeros(n, self.hidden, device=self.device)
        return self.cached.forward(tokens, feats, positions, visible, keep)[1]

    def extend(self, tokens: list[int]) -> None:
        start = self.cached.committed
        ids = torch.tensor(tokens, device=self.device)
        self.forward(ids, torch.arange(start, start + len(tokens), device=self.device), keep=1)
        self.cached.committed += len(tokens)

    def commit(self, slots: list[int]) -> None:
        self.cached.commit(slots)
