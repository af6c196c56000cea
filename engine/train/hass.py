"""HASS's loss for the EAGLE head (SALF & TALF paper Sec. 2.2 and Sec. 4.1; HASS, Zhang et al.
2025): training as the head drafts, its own features fed back.

EAGLE's loss teacher-forces every row on the target's features; in drafting, from the second
step on, a row's feature is the head's own output at its parent. HASS follows short stretches
of the target's sequence (x_{1:s} -> x_{s+1} -> x_{s+2} -> p_{s+3} at depth 3) with the
head's features fed back and applies the losses at every step. With head rows i (token
x_{i+1}, position i, as engine/train/eagle_loss.py), level k = 1..depth:

    level 1: row i pairs x_{i+1} with the target's f_i          (EAGLE's rows)
    level k: row i pairs x_{i+1} with the level k-1 output of row i - 1

and a level-k row i attends to what it would see as the depth-k node below root i - k + 1:
the level-1 rows up to i - k + 1 (the committed prefix, the target's features), then its chain
ancestors, the level-m row i - k + m for m = 2 .. k - 1, then itself (`level_mask`). Rows
i < k - 1 have no such root and are left out of the loss. Every level's rows are scored
against the target's f_{i+1} and p_{i+2} = softmax(lm_head(f_{i+1})):

    L_k = lambda_reg * SmoothL1 + lambda_cls * CE + lambda_distil * top-K distillation

with the top-K distillation -sum_{v in top-K(p)} p(v) log p(d)(v) (HASS's, K = 10), lambda_reg
= 1 and lambda_cls = lambda_distil = 10 (Sec. 4.1), and L the mean of L_1..L_depth (depth 3,
Sec. 4.1). The fed-back features keep their gradient (the steps train together).
"""

from __future__ import annotations

import torch
from torch import nn

from engine.train.eagle_loss import LAMBDA_CLS, LAMBDA_REG, Parts, eagle_objective, head_logits

LAMBDA_DISTIL, TOP_K, DEPTH = 10.0, 10, 3  # Sec. 4.1


def topk_distillation(target_logits: torch.Tensor, logits: torch.Tensor, k: int) -> torch.Tensor:
    """-sum over the target's k most probable tokens of p(v) log q(v), per row [...]."""
    p = torch.softmax(target_logits.float(), -1)
    top_p, top_v = p.topk(min(k, p.shape[-1]), dim=-1)  # [..., k]
    log_q = torch.log_softmax(logits.float(), -1).gather(-1, top_v)  # [..., k]
    return -(top_p * log_q).sum(-1)


def level_mask(n: int, k: int, device=None) -> torch.Tensor:
    """What level-k rows see: [n, k * n] bool over the level-1 .. level-k rows (level-major),
    see the module docstring; a row without a root (i < k - 1) sees itself only."""
    i = torch.arange(n, device=device)
    mask = torch.zeros(n, k, n, dtype=torch.bool, device=device)  # [row, level - 1, row']
    if k == 1:
        mask[:, 0] = i[:, None] >= i[None, :]  # causal
        return mask.view(n, n)
    mask[:, 0] = i[None, :] <= (i - k + 1)[:, None]  # the prefix up to the root
    for m in range(2, k):  # chain ancestors: level m at row i - k + m
        mask[:, m - 1] = i[None, :] == (i - k + m)[:, None]
    mask[: k - 1] = False  # no root: itself only
    mask[:, k - 1] = torch.eye(n, dtype=torch.bool, device=device)
    return mask.view(n, k * n)


def hass_rows(
    head, embed: nn.Module, tokens: torch.Tensor, feats: torch.Tensor, depth: int = DEPTH
) -> list[torch.Tensor]:
    """The head's outputs per level [B, T-1, H] each (level 1 first) on tokens [B, T] and
    the target's feats [B, T, H]; see the module docstring."""
    b, t = tokens.shape
    n = t - 1
    emb = embed(tokens[:, 1:]).to(feats.dtype)  # [B, n, H]
    positions = torch.arange(n, device=tokens.device).expand(b, n)
    outs, keys, values = [], [], []
    feat = feats[:, :-1]  # level 1: the target's
    for k in range(1, depth + 1):
        past = None if not keys else (torch.cat(keys, 2), torch.cat(values, 2))
        visible = level_mask(n, k, tokens.device)[None].expand(b, n, k * n)
        out, (kk, vv) = head(emb, feat, positions, visible, past)  # [B, n, H]
        outs.append(out)
        keys.append(kk)
        values.append(vv)
        feat = torch.cat([torch.zeros_like(out[:, :1]), out[:, :-1]], 1)  # row i: row i - 1's
    return outs


def hass_loss(
    head,
    embed: nn.Module,
    lm_head: nn.Module,
    tokens: torch.Tensor,
    feats: torch.Tensor,
    depth: int = DEPTH,
    top_k: int = TOP_K,
    lambda_reg: float = LAMBDA_REG,
    lambda_cls: float = LAMBDA_CLS,
    lambda_distil: float = LAMBDA_DISTIL,
) -> Parts:
    """L of HASS over a batch (tokens [B, T], feats [B, T, H]): the mean over the levels of
    each level's EAGLE objective plus lambda_distil times its top-K distillation."""
    target = feats[:, 1:]  # [B, n, H] row i's f_{i+1}
    n = target.shape[1]
    totals = []
    for k, out in enumerate(hass_rows(head, embed, tokens, feats, depth), 1):
        weight = (torch.arange(n, device=tokens.device) >= k - 1).float().expand(out.shape[:2])
        logits = head_logits(lm_head, target, out)  # [B, n, V] each
        parts = eagle_objective(out, target, lm_head, lambda_reg, lambda_cls, weight, logits)
        distil = topk_distillation(*logits, top_k)  # [B, n]
        distil = (distil * weight).sum() / weight.sum().clamp_min(1.0)
        totals.append((parts.loss + lambda_distil * distil, parts.reg, parts.cls, parts.accuracy))
    stacked = [torch.stack(x).mean() for x in zip(*totals)]
    return Parts(*stacked)
