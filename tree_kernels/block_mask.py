"""Host-side mask tables for the block-sparse tree attention kernel.

The kernel (``tree_kernels/triton_tree_attention.py``) works on tiles of BLOCK_M queries by BLOCK_N
tree keys (32 x 32, the block size of DySpec App. C.1). Per tree it needs:
  * the ancestor mask (DDTree Sec. 4.4) packed into one int32 word per (query, key block),
  * per query block, the list of tree key blocks that hold any visible pair; all other
    tiles are skipped, and the DFS reorder (DySpec App. C, Def. 1) makes them common.
Everything is vectorised torch (no loop over nodes) and runs once per tree, on the
kernel's device; all layers of a verification forward reuse the result.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from tree_kernels.reference import ancestor_matrix

BLOCK_M = 32  # queries per program (DySpec App. C.1 uses blocks of 32)
BLOCK_N = 32  # tree keys per tile: one int32 word of ancestor bits per query row


class TreeMasks(NamedTuple):
    """Kernel-side description of one tree's mask (see ``tree_masks``)."""

    bits: torch.Tensor  # [N, W] int32, bit c of word w of row j: node 32 * w + c visible to j
    counts: torch.Tensor  # [QB] int32, number of visible tree key blocks per query block
    blocks: torch.Tensor  # [QB, W] int32, visible key block indices first, ascending


def block_visibility(
    parents: torch.Tensor, block_m: int = BLOCK_M, block_n: int = BLOCK_N
) -> torch.Tensor:
    """BoolTensor[ceil(N / block_m), ceil(N / block_n)]: tile (qb, kb) of the tree part of
    the mask holds at least one visible (query, key) pair. The kernel computes exactly
    these tiles (prefix tiles are always visible and are not in this table)."""
    anc = ancestor_matrix(parents)  # [N, N]
    n = anc.shape[0]
    qb, kb = -(-n // block_m), -(-n // block_n)
    padded = torch.zeros(qb * block_m, kb * block_n, dtype=torch.bool, device=anc.device)
    padded[:n, :n] = anc
    return padded.view(qb, block_m, kb, block_n).any(dim=3).any(dim=1)


def tree_masks(parents: torch.Tensor, device: torch.device | str | None = None) -> TreeMasks:
    """Ancestor bits and the per-query-block list of visible key blocks, on ``device``."""
    device = parents.device if device is None else torch.device(device)
    anc = ancestor_matrix(parents.to(device))  # [N, N]
    n = anc.shape[0]
    words = -(-n // BLOCK_N)
    qblocks = -(-n // BLOCK_M)
    cols = torch.zeros(n, words * BLOCK_N, dtype=torch.bool, device=device)
    cols[:, :n] = anc
    weights = torch.ones(BLOCK_N, dtype=torch.int64, device=device) << torch.arange(
        BLOCK_N, device=device
    )
    packed = (cols.view(n, words, BLOCK_N).long() * weights).sum(-1)  # [N, W] in [0, 2**32)
    bits = torch.where(packed >= 2**31, packed - 2**32, packed).to(torch.int32)  # two's complement
    rows = torch.zeros(qblocks * BLOCK_M, words, dtype=torch.bool, device=device)
    rows[:n] = bits != 0
    visible = rows.view(qblocks, BLOCK_M, words).any(dim=1)  # [QB, W]
    counts = visible.sum(dim=1).to(torch.int32)  # [QB]
    kb = torch.arange(words, device=device)
    blocks = torch.sort(torch.where(visible, kb, words), dim=1).values.to(torch.int32)  # [QB, W]
    return TreeMasks(bits.contiguous(), counts.contiguous(), blocks.contiguous())


def unpack_bits(bits: torch.Tensor, n: int) -> torch.Tensor:
    """Inverse of the packing in ``tree_masks``: BoolTensor[N, n] from int32 words [N, W]."""
    shifts = torch.arange(BLOCK_N, device=bits.device, dtype=torch.int32)
    unpacked = (bits[:, :, None] >> shifts) & 1  # [N, W, 32]
    return unpacked.reshape(bits.shape[0], -1)[:, :n].bool()


def visible_block_count(
    parents: torch.Tensor, block_m: int = BLOCK_M, block_n: int = BLOCK_N
) -> int:
    """Number of tree tiles the kernel computes (the block count of DySpec App. C, Table 5)."""
    return int(block_visibility(parents, block_m, block_n).sum())
