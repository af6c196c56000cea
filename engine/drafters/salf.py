"""SALF: dynamic tree construction with stopping at low further gains ("salf_talf.txt",
Sec. 3.3, Algorithm 2; the optimal tree search of SpecExec, Svirschevski et al. 2024, App. B).

Every node n carries pr(n), the product of the draft probabilities along its path (EAGLE-2's
global acceptance estimate V_n, App. B). A priority queue Q of capacity N holds the most
probable nodes not yet expanded; the output set G keeps the N most probable nodes taken from Q.
Each iteration pops the B most probable nodes of Q into G (the batch D), drops those that cannot
stay in G (pr <= eps, the smallest pr in a full G, l. 10-12), stops when the batch's total
probability is below th (l. 13, SALF), and otherwise expands the batch with one draft forward
and pushes its children into Q. The batch sums decrease monotonically (Theorem 1), so the
stopping rule cuts exactly the iterations of low further gain. With th = 0 it runs until no
popped node can enter G, and G is the top-N set of the whole tree by pr (Theorems 2-3,
SpecExec's optimal tree), for any B < N.

Counting: the root (the committed token, pr = 1) is not a candidate token; N counts drafted
nodes (App. D: "the number of total candidate tokens in a tree (N)"). Ties in pr keep the
earlier node, so a parent always outranks its children and G stays prefix-closed. Nodes are
never expanded below depth `remaining`. Children are deterministic (top-N by pr).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import torch

from engine.draft import DecodeState, TreeBuilder
from engine.drafters.record import Drafter
from engine.transfer import to_device
from engine.tree import DETERMINISTIC, Tree

# how this method draws siblings, at temperature 0 and above (engine/tree.py)
SAMPLING = DETERMINISTIC


@dataclass(frozen=True)
class SALFConfig:
    N: int = 60  # candidate tokens in the tree (App. D)
    B: int = 10  # nodes expanded per iteration, the batch (App. D)
    th: float = 0.6  # SALF threshold on the batch's probability sum (App. D); 0: SpecExec

    def __post_init__(self) -> None:
        if not 1 <= self.B <= self.N:
            raise ValueError(f"need 1 <= B <= N, got B={self.B}, N={self.N}")
        if not 0.0 <= self.th < 1.0:
            raise ValueError(f"th must be in [0, 1), got {self.th}")


def build(draft: TreeBuilder, state: DecodeState, cfg: SALFConfig, gen: torch.Generator) -> Tree:
    keep = grow(draft, state, cfg)
    return draft.tree(SAMPLING.at(state.draft_warp.greedy), keep=keep)


def grow(draft: TreeBuilder, state: DecodeState, cfg: SALFConfig) -> list[int]:
    """Algorithm 2; returns the builder nodes of G (root first)."""
    cap = cfg.N + 1  # G holds the root and N candidate tokens
    g_heap = [(1.0, 0, 0)]  # min-heap of G: (pr, -order, node); evicts the latest of ties
    in_g = {0}
    # Q: rows (pr, parent node, token), kept sorted by pr descending and, among ties, by
    # insertion order (a stable sort of [Q; new children] keeps both), capacity N
    queue = torch.zeros(0, 3, dtype=torch.float64, device=draft.device)  # on the draft's device
    batch, batch_pr = [0], [1.0]  # the root is popped in the first iteration
    order = 1
    while True:
        eps = g_heap[0][0] if len(g_heap) >= cap else 0.0  # l. 10-11
        kept = [(n, p) for n, p in zip(batch, batch_pr) if p > eps and n in in_g]  # l. 12
        if not kept or sum(p for _, p in kept) < cfg.th:  # l. 13 (and nothing left to expand)
            break
        kept = [(n, p) for n, p in kept if draft.depth[n] < state.remaining]
        if kept:
            nodes = [n for n, _ in kept]
            top_p, top_t = draft.expand_top(nodes, cfg.N)  # [b, k] the top N below each
            b, k = top_p.shape
            # [b, 2]: pr and builder node of each parent, on the draft's device
            known = to_device(kept, top_p.device, torch.float64)
            children = torch.stack(
                [  # [b * k, 3] in insertion order
                    (known[:, 1:] * top_p.double()).flatten(),
                    known[:, :1].expand(b, k).flatten(),
                    top_t.flatten().double(),
                ],
                dim=1,
            )
            queue = torch.cat([queue, children])
            queue = queue[torch.sort(queue[:, 0], descending=True, stable=True).indices[: cfg.N]]
        if queue.shape[0] == 0:
            break
        # l. 5-9: pop B; the queue stays on the device, the popped rows are this round's read
        popped, queue = queue[: cfg.B].tolist(), queue[cfg.B :]
        batch, batch_pr = [], []
        for p, parent, token in popped:
            node = draft.add(int(parent), int(token))
            batch.append(node)
            batch_pr.append(p)
            heapq.heappush(g_heap, (p, -order, node))
            order += 1
            in_g.add(node)
            if len(g_heap) > cap:
                in_g.discard(heapq.heappop(g_heap)[2])
    return sorted(in_g)


DRAFTER = Drafter(
    name="salf",
    config=SALFConfig,
    build=build,
    sampling=SAMPLING,
    default_verifier="nss",
    nodes=lambda c: c.N,
    budget="N",  # N candidate tokens in the tree (its B is the expansion batch)
)
