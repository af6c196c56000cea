"""DySpec: greedy dynamic token-tree expansion (Xiong et al. 2024; "dyspec.txt").

Every tree position where the draft could sample one more token is a *slot*: the k-th draw
(k = 0, 1, ...) below node u, without replacement from the draft distribution q_u. Under the
paper's Hypothesis 1 (draft probability ~ acceptance rate) a slot's estimated value is the
probability that verification reaches it (App. D, Eqs. 7-11):

    value(u, k) = P(u) * (1 - sum_{j<k} q_u(x_j)),    P(child x_k of u) = P(u) * q_u(x_k),

with P(root) = 1, i.e. P(u) is u's draft path probability. Sec. 4.2 / App. A.1 phrase the same
update multiplicatively: drawing x_k with residual probability r = q_u(x_k) / (1 - sum_{j<k}
q_u(x_j)) turns the slot of value v into a first-child slot of value v * r ("accepted") and a
next-sibling slot of value v * (1 - r) ("rejected").

- variant "fixed_size" (Algorithm 1, Sec. 4.2): a max-heap of open slots; pop the most valuable,
  draw its token, push the two new slots, until `budget` tokens are drafted. Both new values
  are at most the popped one, so slots are filled in non-increasing value order and the tree is
  the top-`budget` set of slots, optimal for the surrogate objective (App. D, D.1). One draft
  forward per node whose first child is drawn.
- variant "threshold" (Sec. 4.4, App. A.2): fill every slot whose value is >= `threshold`,
  layer by layer, one draft forward per depth, still capped at `budget` (the most valuable slots
  of a layer win). With threshold = the value of the last slot the heap fills, both variants
  give the same tree.

Draws: at temperature > 0 the k-th child of u is the k-th draw without replacement from the
warped q_u (Gumbel-top-k keys drawn once per node, so later draws never depend on whether they
are made), and the tree has sampling="without_replacement" in draw order, for the SpecInfer /
Sequoia-style verifier of App. A.3. Greedy (temperature 0): the draws are the draft's tokens in
decreasing probability (plain softmax), a deterministic tree. The paper drafts at temperature
0.6 at every target temperature (Sec. 5.1), greedy targets included: a sweep says so with
`sampling: {draft_temperature: 0.6}` (examples/dyspec.yaml); without it the draft samples as
the target does, and a greedy target gets the deterministic tree.

Node order (App. C): DySpec renumbers the finished tree in depth-first order so that a
block-sparse tree-attention kernel skips more tiles (a DFS preorder is topological, and with
children in their original order it keeps every sibling list in draw order, as the
without-replacement verifiers need). With `reorder` (default, as in the paper) the builder
numbers the tree in the DFS order of tree_kernels/reorder.py `dfs_order(parents, heavy_first=False)`
(engine/tree.py dfs_preorder, the same order on the builder's host lists);
the target forward, the verifier and both cache commits then all use that numbering, so
nothing has to be mapped back. It changes no token, only the order nodes are fed to the target
(useful with the "tree_triton" attention, neutral with dense masks). The heavy-path-first
variant of tree_kernels/reorder.py would reorder siblings and is not used here.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Literal

import torch

from engine.draft import DecodeState, TreeBuilder
from engine.drafters.record import Drafter
from engine.sampling import draws_without_replacement
from engine.transfer import read_pair, to_device
from engine.tree import Tree, TreeSampling, dfs_preorder

# how this method draws siblings, at temperature 0 and above (engine/tree.py)
SAMPLING = TreeSampling(greedy="deterministic", sampled="without_replacement")


@dataclass(frozen=True)
class DySpecConfig:
    budget: int = 64  # maximum drafted tokens (Sec. 5.3: "maximum draft token tree size 64")
    variant: Literal["fixed_size", "threshold"] = "fixed_size"  # Alg. 1 / Alg. A.2
    threshold: float = 0.001  # slot-value threshold of the threshold variant (App. B.1)
    reorder: bool = True  # number the tree in DFS order (App. C)

    def __post_init__(self) -> None:
        if self.budget < 1:
            raise ValueError(f"budget must be >= 1, got {self.budget}")
        if not 0.0 < self.threshold < 1.0:
            raise ValueError(f"threshold must be in (0, 1), got {self.threshold}")


def build(draft: TreeBuilder, state: DecodeState, cfg: DySpecConfig, gen: torch.Generator) -> Tree:
    if cfg.variant == "threshold":
        _grow_threshold(draft, state, cfg, gen)
    else:
        grow_greedy(draft, state, cfg.budget, gen)
    sampling = SAMPLING.at(state.draft_warp.greedy)
    if not cfg.reorder or draft.size <= 2:
        return draft.tree(sampling)
    return draft.tree(sampling, order=dfs_preorder(draft.parents))  # perm[new] = old


def _draws(draft: TreeBuilder, nodes: list[int], k: int, state: DecodeState, gen):
    """The first k draws below each node and their q: ([n, k] long, [n, k] float). Greedy:
    the top-k (TreeBuilder.expand_top: on the fast path from inside the draft forward)."""
    if state.draft_warp.greedy:
        q, tokens = draft.expand_top(nodes, k)
        return tokens, q
    return draws_without_replacement(draft.expand(nodes), k, False, gen)


def grow_greedy(
    draft: TreeBuilder, state: DecodeState, budget: int, gen: torch.Generator
) -> list[float]:
    """Algorithm 1; returns the value of every filled slot in fill order (node order).

    Expansion in waves where a draft forward of a few rows costs about one of a single row
    (TreeBuilder.wide: the padded graph engines): when a node must be expanded, every other
    node that may still be popped for its first child is expanded in the same forward (see
    _wave). A node's draws do not depend on when it is expanded, so the tree is the same, with
    one draft forward and one host read per wave instead of per node: 6-15% fewer on the real
    draft from budget 32 on, whose trees are deep (bench/dyspec_waves.py, docs/fast_path.md).
    Sampled draws then come from the generator in wave order: the same law, another stream."""
    path_p = {0: 1.0}  # node -> P(u), draft path probability
    draws: dict[int, tuple[list[int], list[float]]] = {}  # node -> its draw sequence
    heap = [(-1.0, 0, 0, 0)]  # (-value, tie-break, node u, draw index k)
    counter, filled = 1, []
    while heap and draft.size - 1 < budget:
        neg_value, _, u, k = heapq.heappop(heap)
        if u not in draws:
            wave = [u] + (_wave(heap, draws, budget - draft.size) if draft.wide else [])
            wave.sort()  # builder order: the batch comes back in the order asked
            t, q = _draws(draft, wave, budget, state, gen)  # [n, k] twice
            probs, tokens = read_pair(q, t)  # one read
            draws.update(zip(wave, zip(tokens, probs)))
        tokens, probs = draws[u]
        if k >= len(tokens) or probs[k] <= 0:
            continue  # the support of q_u is exhausted
        child = draft.add(u, tokens[k])
        filled.append(-neg_value)
        path_p[child] = path_p[u] * probs[k]
        rest = -neg_value - path_p[u] * probs[k]  # P(u) * (1 - sum_{j<=k} q_u(x_j))
        if draft.depth[child] < state.remaining and path_p[child] > 0:
            heapq.heappush(heap, (-path_p[child], counter, child, 0))
        if rest > 0 and k + 1 < len(tokens):
            heapq.heappush(heap, (-rest, counter + 1, u, k + 1))
        counter += 2
    return filled


def _wave(heap: list, draws: dict, slots_left: int) -> list[int]:
    """The unexpanded nodes whose first-child slot is among the `slots_left` best open slots:
    slots pushed later are worth no more than the slot that pushed them, so a node ranked
    below that in the heap now is never popped for its first child, and one ranked within it
    may be."""
    best = heapq.nsmallest(max(slots_left, 0), heap)
    return [u for _, _, u, k in best if k == 0 and u not in draws]


def _grow_threshold(
    draft: TreeBuilder, state: DecodeState, cfg: DySpecConfig, gen: torch.Generator
) -> None:
    """Algorithm A.2: all slots of value >= threshold, one draft forward per layer."""
    level, level_p = [0], [1.0]  # nodes whose first-child slot value P(u) >= threshold
    while level and draft.size - 1 < cfg.budget and draft.depth[level[0]] < state.remaining:
        room = cfg.budget - (draft.size - 1)
        tokens, q = _draws(draft, level, room, state, gen)  # [n, k]
        q = q.double()
        value = to_device(level_p, q.device, torch.float64)[:, None] * (
            1.0 - (q.cumsum(-1) - q)
        )  # [n, k] slot values, decreasing along k
        ok = (value >= cfg.threshold) & (q > 0)  # a prefix of every row
        rows_k = ok.nonzero()  # [m, 2] row-major: parent order, then draw order
        if rows_k.shape[0] > room:  # keep the most valuable; per node still a prefix in k
            best = value[ok].topk(room).indices.sort().values
            rows_k = rows_k[best]
        rows, ks = rows_k[:, 0].tolist(), rows_k[:, 1].tolist()
        tok, qs = tokens[rows, ks].tolist(), q[rows, ks].tolist()
        parents, parents_p = level, level_p
        level, level_p = [], []
        for row, t, qk in zip(rows, tok, qs):
            child = draft.add(parents[row], t)
            p_child = parents_p[row] * qk
            if p_child >= cfg.threshold:
                level.append(child)
                level_p.append(p_child)


DRAFTER = Drafter(
    name="dyspec",
    config=DySpecConfig,
    build=build,
    sampling=SAMPLING,
    default_verifier="specinfer",
    nodes=lambda c: c.budget,
    budget="budget",
)
