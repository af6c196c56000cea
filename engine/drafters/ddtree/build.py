"""DDTree: the optimal draft tree from per-position marginals (Ringel & Romano 2026,
"ddtree.txt").

A block drafter gives one marginal q_i over the vocabulary for each of the next L positions
(Sec. 3). Under the factorised surrogate Q(y_1:L) = prod_i q_i(y_i) (Eq. 2) the expected
acceptance length of a tree T is the sum of its prefix probabilities q(u) = prod_i q_i(u_i)
(Prop. 1, Eq. 8), so the best tree with at most B nodes is the set of the B most probable
prefixes, which is prefix-closed (Prop. 2). Algorithm 1 enumerates them best-first over rank
tuples rho = (rho_1..rho_d) of the top-K tokens per depth, K = min(B, |V|) (Lemma 1): a max-heap
keyed by sigma(rho) = sum_i log q_i^(rho_i), starting from (1); popping rho pushes its next
sibling (.., rho_d + 1) and its first child (.., rho_d, 1). B pops return the optimal tree
(Prop. 3), in O(B log B) (Remark 2).

Verification (Sec. 4.4) uses depth position ids (Tree.position_ids: prefix + depth) and the
ancestor-only mask; the walk is the target's own decoding rule: greedy at temperature 0 (the
"greedy" verifier), sampling at temperature > 0 (the "nss" verifier: sample the target's token
at the current node, follow the child holding it; lossless for any deterministic tree).

Block drafters (`block_marginals(state, block_size) -> FloatTensor[L, V]`, or directly the
top-K of each, `block_top(state, block_size, K) -> ([L, K], [L, K])`) are chosen by name
(`drafter`). "ar" derives marginals from the autoregressive draft model, an approximation
documented in `ARBlockDrafter`. "block" is the paper's drafter: a trained block-diffusion
drafter conditioned on the target's hidden states (engine/drafters/ddtree/block.py), loaded from
the checkpoint named by `checkpoint` (`orch train block-drafter`); one drafter forward per
round gives all L marginals, and the draft model is not run. The decode loop opens it per
generation and hands it over as `state.attached` (engine/decode.py).
Nodes are never deeper than `remaining`; B counts drafted nodes (the root is not counted).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Literal

import torch

from engine.config import ADDED_LATER
from engine.draft import DecodeState, TreeBuilder
from engine.transfer import read_pair
from engine.tree import DETERMINISTIC, Tree

# how this method draws siblings, at temperature 0 and above (engine/tree.py)
SAMPLING = DETERMINISTIC


@dataclass(frozen=True)
class DDTreeConfig:
    B: int = 256  # node budget (App. B budgets 16..1024; Sec. 5.3: speedup peaks at 256-512)
    # positions drafted per round: App. B's "block size 16" is the block [b, m, ..., m] of
    # Sec. 3, the bonus token b and L = 15 masked positions (as DFlash counts its blocks)
    L: int = 15
    drafter: Literal["ar", "block"] = "ar"  # block drafter giving the per-position marginals
    # the trained block drafter's checkpoint (drafter: block), by name (engine/checkpoint.py)
    checkpoint: str | None = field(default=None, metadata=ADDED_LATER)

    def __post_init__(self) -> None:
        if self.B < 1 or self.L < 1:
            raise ValueError(f"B and L must be >= 1, got B={self.B}, L={self.L}")
        if (self.drafter == "block") != (self.checkpoint is not None):
            raise ValueError(
                "drafter: block needs checkpoint: NAME (orch train block-drafter), and "
                "checkpoint is only for drafter: block"
            )


class ARBlockDrafter:
    """Per-position marginals from an autoregressive draft model (an approximation).

    A block diffusion drafter predicts q_i(. | c, b) for positions i = 1..L in one pass without
    conditioning on the tokens it places before i. An autoregressive draft only gives
    path-conditioned distributions, so we condition on one path, the draft's own greedy
    continuation: q_i = q_draft(. | c, b, y_1..y_{i-1}) with y_j = argmax q_j. This is the
    marginal when the draft is certain of its prefix and otherwise a one-path estimate of it;
    it costs L - 1 sequential one-token draft forwards instead of one block forward. The
    rolled-out chain is the rank-(1, .., 1) path of the tree, so its nodes are reused.
    """

    def __init__(self, draft: TreeBuilder) -> None:
        self.draft = draft
        self.chain = [0]  # builder node of the greedy prefix of each length (0 = root)
        self.host = None  # the top-k pair as host lists, when the chain's feed read it

    def block_top(self, state: DecodeState, block_size: int, k: int):
        """The top-k of q_1..q_L: ([L, k] probabilities descending, [L, k] tokens); only the
        top-k rows are needed by Algorithm 1, so a fast draft never builds the [L, V] softmax,
        and rolls the chain out on the device (TreeBuilder.expand_chain)."""
        top_q, top_t, self.chain, self.host = self.draft.expand_chain(block_size, k)  # [L, k]
        return top_q, top_t


BLOCK_DRAFTERS = {"ar": ARBlockDrafter}  # built per round from the draft model


def block_drafter(cfg: DDTreeConfig, draft: TreeBuilder, state: DecodeState):
    """This round's block drafter: for "block" the generation's trained drafter
    (engine/drafters/ddtree/block_context.py BlockContext), which the decode loop opened and keeps
    fed with the target's features; else BLOCK_DRAFTERS' over the draft model."""
    if cfg.drafter != "block":
        return BLOCK_DRAFTERS[cfg.drafter](draft)
    if state.attached is None:
        raise RuntimeError("drafter: block needs the decode loop's target features")
    return state.attached


def best_first(logq: list[list[float]], budget: int) -> list[tuple[int, int]]:
    """Algorithm 1 on log q_i^(k) (logq[i][k], ranks 0-based and sorted descending per depth).

    Returns the popped prefixes in pop order as (parent index in this list or -1, rank at
    their depth); every parent precedes its children. Lines 7-12 push the next sibling while
    a rank is left and the first child above depth L, whatever their probability (a rank of
    probability zero, log q = -inf, scores -inf and comes last). Ties in sigma, which the paper
    leaves open, go to the shallower prefix, then the smaller rank tuple (lexicographic): a
    total order in which a parent and an earlier sibling come first, so the pops are the first
    B prefixes in it; engine/drafters/ddtree/plan.py selects the same set with tensor ops.
    """
    depth_limit, k_max = len(logq), len(logq[0]) if logq else 0
    out: list[tuple[int, int]] = []
    score: list[float] = []
    # (-sigma, depth, rank tuple, parent, rank)
    heap = [(-logq[0][0], 0, (0,), -1, 0)] if k_max else []
    while heap and len(out) < budget:
        neg, d, ranks, parent, rank = heapq.heappop(heap)
        me = len(out)
        out.append((parent, rank))
        score.append(-neg)
        base = score[parent] if parent >= 0 else 0.0
        if rank + 1 < len(logq[d]):  # next sibling (l. 7-9)
            sibling = ranks[:-1] + (rank + 1,)
            heapq.heappush(heap, (-(base + logq[d][rank + 1]), d, sibling, parent, rank + 1))
        if d + 1 < depth_limit:  # first child (l. 10-12)
            heapq.heappush(heap, (-(score[me] + logq[d + 1][0]), d + 1, ranks + (0,), me, 0))
    return out


def build(draft: TreeBuilder, state: DecodeState, cfg: DDTreeConfig, gen: torch.Generator) -> Tree:
    block_size = min(cfg.L, state.remaining)
    drafter = block_drafter(cfg, draft, state)
    if hasattr(drafter, "block_top"):  # K = min(B, |V|), Lemma 1; [L, K] sorted descending
        top_q, top_t = drafter.block_top(state, block_size, cfg.B)
    else:
        marginals = drafter.block_marginals(state, block_size)  # [L, V]
        top_q, top_t = marginals.topk(min(cfg.B, marginals.shape[-1]), dim=-1)
    if getattr(drafter, "host", None) is not None:  # the chain's feed read them already
        logq, tokens = drafter.host
    else:  # one host read: log q and the tokens together (ids < 2^53 are exact in float64)
        logq, tokens = read_pair(torch.log(top_q.double()), top_t)
    chain = getattr(drafter, "chain", [0])
    node_of: list[int] = []  # popped prefix -> builder node
    on_chain: list[bool] = []  # rank tuple is (1, .., 1): reuse the rolled-out chain node
    for parent, rank in best_first(logq, cfg.B):
        parent_node = node_of[parent] if parent >= 0 else 0
        d = draft.depth[parent_node]  # 0-based depth of the new prefix
        chained = (
            rank == 0
            and (parent < 0 or on_chain[parent])
            and d + 1 < len(chain)
            and draft.tokens[chain[d + 1]] == tokens[d][0]
        )
        node_of.append(chain[d + 1] if chained else draft.add(parent_node, tokens[d][rank]))
        on_chain.append(chained)
    return draft.tree(SAMPLING.at(state.draft_warp.greedy), keep=[0] + node_of)
