"""Tree attention in plain torch: the test oracle and the fallback without Triton.

A draft tree of N nodes is verified in one forward pass after P committed prefix
positions. Every tree node attends to the whole prefix, to its ancestors in the tree
and to itself (the ancestor-only mask of DDTree Sec. 4.4; DySpec Sec. 2 eq. for tree
attention after Liu et al.). Nodes are in topological order (parent index < child index);
``parents[j] == -1`` marks a node hanging directly under the last prefix position.
"""

from __future__ import annotations

import math

import torch


def check_parents(parents: torch.Tensor) -> None:
    """Raise ValueError unless ``parents`` is a 1-D integer tensor in topological order."""
    if parents.ndim != 1 or parents.dtype not in (torch.int64, torch.int32):
        raise ValueError(
            f"parents must be a 1-D integer tensor, got {parents.dtype} {tuple(parents.shape)}"
        )
    n = parents.numel()
    idx = torch.arange(n, device=parents.device)
    if n and bool(((parents < -1) | (parents >= idx)).any()):
        raise ValueError("parents must be in topological order: -1 <= parents[j] < j")


def node_depths(parents: torch.Tensor) -> torch.Tensor:
    """Depth of every node below the prefix: 0 for nodes with parent -1.

    Vectorised over nodes; the python loop runs over depth levels only.
    """
    parents = parents.long()
    n = parents.numel()
    depth = torch.zeros(n, dtype=torch.long, device=parents.device)  # [N]
    has_parent = parents >= 0
    safe = parents.clamp(min=0)
    for _ in range(n):
        new = torch.where(has_parent, depth[safe] + 1, 0)
        if torch.equal(new, depth):
            break
        depth = new
    return depth


def ancestor_matrix(
    parents: torch.Tensor, check: bool = True, height: int | None = None
) -> torch.Tensor:
    """BoolTensor[N, N]: ``anc[j, i]`` is True iff node i is node j or an ancestor of j.

    Rows are queries and columns keys, so this is the tree part of the attention mask
    (lower triangular in topological order). Built by pointer doubling: after step s every
    row holds the ancestors closer than 2^s, so ceil(log2 N) steps of [N, N] row gathers cover
    any depth, with no host read (check=False also skips the validation's one read: for trees
    a builder made, topological by construction). height: a bound on the tree's depth, when
    known: ceil(log2(height + 1)) steps then suffice.
    """
    if check:
        check_parents(parents)
    parents = parents.long()
    n = parents.numel()
    anc = torch.eye(n, dtype=torch.bool, device=parents.device)  # [N, N] distance < 1
    up = parents.clone()  # [N] the 2^s-th ancestor of each node, -1 past the top
    bound = n - 1 if height is None else min(height, n - 1)
    for _ in range(bound.bit_length()):  # 2^steps > bound >= any depth
        live = up >= 0  # [N]
        hop = up.clamp(min=0)  # [N]
        anc |= anc[hop] & live[:, None]  # ancestors at distance 2^s .. 2^(s+1) - 1
        up = torch.where(live, up[hop], up)
    return anc


def tree_attention_mask(parents: torch.Tensor, prefix_len: int, dtype: torch.dtype) -> torch.Tensor:
    """Additive mask [N, P + N]: 0 where visible, the dtype's minimum elsewhere."""
    anc = ancestor_matrix(parents)  # [N, N]
    n = anc.shape[0]
    visible = torch.cat(
        [torch.ones(n, prefix_len, dtype=torch.bool, device=anc.device), anc], dim=1
    )
    mask = torch.zeros(n, prefix_len + n, dtype=dtype, device=anc.device)  # [N, P + N]
    return mask.masked_fill(~visible, torch.finfo(dtype).min)


def tree_attention_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    parents: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """Tree attention by a dense additive mask and softmax, computed in fp32.

    q: [B, H, N, D]; k, v: [B, Hkv, P + N, D] with H a multiple of Hkv (GQA: query head h
    reads key/value head h // (H // Hkv)); parents: [N]. Returns [B, H, N, D] in q's dtype.
    """
    b, h, n, d = q.shape
    hkv, total = k.shape[1], k.shape[2]
    if h % hkv:
        raise ValueError(f"query heads {h} must be a multiple of key/value heads {hkv}")
    if parents.numel() != n or total < n:
        raise ValueError(f"parents has {parents.numel()} nodes, q has {n}, keys {total}")
    prefix = total - n
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    kf = k.float().repeat_interleave(h // hkv, dim=1)  # [B, H, P + N, D]
    vf = v.float().repeat_interleave(h // hkv, dim=1)  # [B, H, P + N, D]
    mask = tree_attention_mask(parents.to(q.device), prefix, torch.float32)  # [N, P + N]
    scores = torch.matmul(q.float(), kf.transpose(-1, -2)) * scale + mask  # [B, H, N, P + N]
    probs = torch.softmax(scores, dim=-1)
    return torch.matmul(probs, vf).to(q.dtype)  # [B, H, N, D]
