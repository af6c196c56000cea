"""TALF for the EAGLE head (SALF & TALF paper Sec. 3.2, Algorithm 1, Sec. 4.1).

Algorithm 1 with the head as D: for every training sequence the target T builds, below each
root x_s, EAGLE-2's beam tree G with top_k = 4 and depth 3 (l. 2) and its soft labels
p_child(n) = T(x_[n]) at every node (l. 5): engine/train/talf.py `target_forest`, which packs
the sequence (a chain) and every root's tree into one forest. Then (l. 6) the head follows the
path from the root to each node n "while feeding f(d) back as input as in HASS" (Sec. 3.2):

    sequence rows   x_{j+1} paired with the target's f_j, causal       (EAGLE's rows)
    tree node n     its token paired with its parent's output feature f(d)

each tree node seeing the sequence up to its root and its own ancestors (the forest's
ancestor-only mask), at head position = its forest depth - 1. The forest's levels (the
sequence, then tree depth 1, 2, ...) run as one head forward each, every level's parents
computed by the one before (`forest_rows`). The loss (l. 7-8): L_n = -sum_v p_child(n)(v) log
p(d)_child(n)(v), summed over the nodes of each G and averaged over the roots
(talf.py `tree_cross_entropy`). Unlike EAGLE and HASS, no regression loss (Sec. 3.2).
"""

from __future__ import annotations

import torch
from torch import nn

from engine.train.eagle_loss import Parts
from engine.train.talf import Forest, TALFConfig, target_forest, tree_cross_entropy
from tree_kernels.reference import ancestor_matrix


def forest_rows(head, embed: nn.Module, forest: Forest, feats: torch.Tensor) -> torch.Tensor:
    """The head's output at every forest node but the first (its slot: node - 1) [T-1, H];
    feats [L, H] the target's features of the sequence (the forest's first L nodes)."""
    t = forest.tree
    parents = t.parents.tolist()
    n_seq = feats.shape[0]
    level = [0] * t.size  # 0: the sequence; d: tree depth d below its root
    for i in range(n_seq, t.size):
        level[i] = level[parents[i]] + 1
    visible = ancestor_matrix(t.parents, check=False)[1:, 1:]  # [T-1, T-1] slots
    tokens, depth = t.tokens.to(feats.device), t.depth.to(feats.device)
    outs: list[torch.Tensor] = []
    keys: list[torch.Tensor] = []
    values: list[torch.Tensor] = []
    start = 1
    while start < t.size:
        end = start
        while end < t.size and level[end] == level[start]:
            end += 1
        if level[start] == 0:  # the sequence: x_{j+1} with f_j
            feat = feats[start - 1 : end - 1]
        else:  # tree nodes: the parent's output (its slot: parent - 1)
            done = torch.cat(outs)  # [start - 1, H]
            slots = torch.tensor([parents[i] - 1 for i in range(start, end)], device=done.device)
            feat = done[slots]
        past = None if not keys else (torch.cat(keys, 2), torch.cat(values, 2))
        emb = embed(tokens[start:end]).to(feats.dtype)  # [m, H]
        out, (k, v) = head(
            emb[None],
            feat[None],
            (depth[start:end] - 1)[None],
            visible[start - 1 : end - 1, : end - 1][None].to(feats.device),
            past,
        )  # [1, m, H]
        outs.append(out[0])
        keys.append(k)
        values.append(v)
        start = end
    return torch.cat(outs)  # [T-1, H]


def eagle_talf_loss(
    head, embed: nn.Module, lm_head: nn.Module, forests: list[Forest], feats: list[torch.Tensor]
) -> Parts:
    """Algorithm 1's L for the head, averaged over the sequences' forests (feats: each
    sequence's target features [L, H])."""
    losses, agree = [], []
    for forest, f in zip(forests, feats):
        out = forest_rows(head, embed, forest, f)  # [T-1, H]
        logits = lm_head(out[forest.rows.to(out.device) - 1])  # [R, V] below each node
        losses.append(tree_cross_entropy(logits, forest))
        labels = forest.labels.to(logits.device)
        agree.append((logits.argmax(-1) == labels.argmax(-1)).float().mean())
    loss = torch.stack(losses).mean()
    zero = torch.zeros((), device=loss.device)
    return Parts(loss, zero, loss, torch.stack(agree).mean())


def build_forests(
    target_model, tokens: torch.Tensor, roots: int, cfg: TALFConfig, gen: torch.Generator
) -> list[Forest]:
    """l. 2-5: the target's forest of each sequence of tokens [B, T], `roots` roots drawn
    (explicit generator) from positions 1 .. T-1 (position 0 has no head row)."""
    out = []
    for seq in tokens:
        picks = torch.randperm(seq.numel() - 1, generator=gen)[:roots] + 1
        out.append(target_forest(target_model, seq.tolist(), picks.tolist(), cfg))
    return out
