"""EAGLE's training loss (SALF & TALF paper Sec. 2.2 and Sec. 4.1; EAGLE, Li et al. 2024).

For a training sequence x_1..x_T with the target's features f_1..f_T (engine/train/eagle_data.py)
the head's drafting iteration at every step s, teacher-forced on the target's features,

    p(d)_{s+1}, f(d)_s <- D(x_{2:s}, f_{1:s-1})        (Sec. 2.2)

is one causal forward over the rows (x_{j+1}, f_j), j = 1..T-1 (`eagle_rows`). Against it:

    L_reg = SmoothL1(f(d)_s, f_s)                      the features (Sec. 2.2, "Regression")
    L_cls = -sum_v p_{s+1}(v) log p(d)_{s+1}(v)        the distributions ("Classification")
    L     = lambda_reg * L_reg + lambda_cls * L_cls     lambda_reg = 1, lambda_cls = 10 (Sec. 4.1)

averaged over the steps (SmoothL1 over the elements of f, as EAGLE's code). The target's
distribution p_{s+1} is softmax(lm_head(f_s)): the features are the LM head's input, so the
target's logits need no storing. The head's p(d)_{s+1} is softmax(lm_head(f(d)_s)), the same
frozen LM head.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

LAMBDA_REG, LAMBDA_CLS = 1.0, 10.0  # Sec. 4.1


class Parts(NamedTuple):
    loss: torch.Tensor  # the weighted sum, what is minimised
    reg: torch.Tensor  # L_reg
    cls: torch.Tensor  # L_cls
    accuracy: torch.Tensor  # how often the head's top token is the target's


def soft_cross_entropy(target_logits: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """-sum_v p(v) log q(v) per row [...], p = softmax(target_logits), q = softmax(logits)."""
    p = torch.softmax(target_logits.float(), -1)
    return -(p * torch.log_softmax(logits.float(), -1)).sum(-1)


def eagle_objective(
    out: torch.Tensor,
    feats: torch.Tensor,
    lm_head: nn.Module,
    lambda_reg: float = LAMBDA_REG,
    lambda_cls: float = LAMBDA_CLS,
    weight: torch.Tensor | None = None,
    logits: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> Parts:
    """L of the head's features out [..., H] against the target's feats [..., H] at the same
    steps (see the module docstring); weight [...] (None: all 1) weighs the steps; logits:
    (lm_head(feats), lm_head(out)) when the caller has them (None: computed here)."""
    target_logits, logits = logits if logits is not None else head_logits(lm_head, feats, out)
    reg = nn.functional.smooth_l1_loss(out.float(), feats.float(), reduction="none").mean(-1)
    cls = soft_cross_entropy(target_logits, logits)  # [...]
    agree = (logits.argmax(-1) == target_logits.argmax(-1)).float()
    w = torch.ones_like(reg) if weight is None else weight.float()
    total = w.sum().clamp_min(1.0)
    reg, cls = (reg * w).sum() / total, (cls * w).sum() / total
    return Parts(lambda_reg * reg + lambda_cls * cls, reg, cls, (agree * w).sum() / total)


def head_logits(lm_head: nn.Module, feats: torch.Tensor, out: torch.Tensor):
    """(the target's logits lm_head(feats), a constant; the head's lm_head(out)) [..., V]."""
    with torch.no_grad():
        target_logits = lm_head(feats)
    return target_logits, lm_head(out)


def eagle_rows(head, embed: nn.Module, tokens: torch.Tensor, feats: torch.Tensor) -> torch.Tensor:
    """The head teacher-forced on the target's features: its output f(d) [B, T-1, H] at rows
    (x_{j+1}, f_j), head positions 0..T-2 (tokens [B, T], feats [B, T, H]); row j predicts
    f_{j+1} and the token after x_{j+1}."""
    b, t = tokens.shape
    positions = torch.arange(t - 1, device=tokens.device).expand(b, t - 1)  # [B, T-1]
    out, _ = head(embed(tokens[:, 1:]).to(feats.dtype), feats[:, :-1], positions)
    return out


def eagle_loss(
    head,
    embed: nn.Module,
    lm_head: nn.Module,
    tokens: torch.Tensor,
    feats: torch.Tensor,
    lambda_reg: float = LAMBDA_REG,
    lambda_cls: float = LAMBDA_CLS,
) -> Parts:
    """EAGLE's L over a batch of sequences (tokens [B, T], feats [B, T, H])."""
    out = eagle_rows(head, embed, tokens, feats)  # [B, T-1, H]
    return eagle_objective(out, feats[:, 1:], lm_head, lambda_reg, lambda_cls)
