"""Standard token-level distillation, the baseline TALF is compared against ("salf_talf.txt",
Sec. 2.2; Hinton et al. 2015).

Along a training sequence x, at every chosen position s the draft's next-token distribution is
fitted to the target's, used as soft labels: EAGLE's classification loss

    L_cls = -sum_v p_{s+1}(v) log p^(d)_{s+1}(v)            (Sec. 2.2)

with p_{s+1} = T(x_{1:s}) and p^(d)_{s+1} = D(x_{1:s}). It sees only the sequence the target
wrote, never the other branches a draft tree holds - the training-inference mismatch of
Sec. 3.1 that TALF removes. (EAGLE's feature regression term L_reg does not apply to a plain
causal-LM draft, which has no target features as input.) A batch is several positions of one
sequence; its loss is the mean of L_cls over them.

It is TALF's loss on the tree made of the root alone: the same forest (engine/train/talf.py)
with no tree nodes, so one causal draft forward and the same cross-entropy code.
"""

from __future__ import annotations

import torch

from engine.runtime.eager import CachedModel
from engine.train.talf import Forest, forest_logits, tree_cross_entropy
from engine.tree import make_tree


def target_labels(target, seq: list[int], roots: list[int]) -> Forest:
    """p_{s+1} = T(x_{1:s}) at each position s in `roots` (0-based: the token x_s is the last
    one the target sees), from one causal target forward over the sequence."""
    L = len(seq)
    if not roots or any(not 0 <= s < L for s in roots):
        raise ValueError(f"roots must be non-empty positions in 0..{L - 1}")
    roots = sorted(set(roots))
    lm = CachedModel(target)
    logits = lm.extend(list(seq), keep=0)  # [L, V]
    idx = torch.tensor(roots)
    probs = torch.softmax(logits[idx.to(lm.device)].float(), dim=-1)  # [R, V]
    return Forest(
        tree=make_tree(list(seq), [-1] + list(range(L - 1))),  # a chain: causal attention
        rows=idx,
        labels=probs.cpu().clone(),  # a normal tensor (the forward ran in inference mode)
        owner=torch.arange(len(roots)),
        roots=tuple(roots),
    )


def distill_loss(draft, labels: Forest) -> torch.Tensor:
    """Mean over the batch's positions of L_cls (Sec. 2.2)."""
    return tree_cross_entropy(forest_logits(draft, labels), labels)
