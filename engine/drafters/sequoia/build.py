"""Sequoia: a static tree shape optimised for a measured acceptance profile (Chen et al. 2024,
"Sequoia: Scalable, Robust, and Hardware-aware Speculative Decoding", Sec. 3.1).

Positional acceptance assumption: once a node is accepted, its k-th child (k-th draw without
replacement, or the k-th most probable token when greedy) is the accepted one with probability
p_k, independent of everything else. The expected number of accepted tokens of a tree is then
F(T) = sum over nodes v of f(v), f(v) = prod of p_rank over the edges of v's path, and Sequoia
finds the tree of n nodes and depth <= D maximising F by dynamic programming:

    F(n, d) = h_1(n - 1, d),   F(1, d) = 0,   F(n > 1, 0) = -inf,
    h_i(m, d) = max(0 if m == 0,  max_{1<=j<=m} p_i * (1 + F(j, d - 1)) + h_{i+1}(m - j, d)),

(children take ranks 1, 2, .. in order; child i's subtree has j nodes). The shape is computed
once per (profile, budget, depth) and cached; each iteration fills it level by level with one
draft forward per depth.

Children: greedy -> the draft's most probable tokens in rank order (deterministic); sampling ->
draws without replacement from the warped q in draw order (sampling="without_replacement", for
Sequoia's verifier, SpecInfer-style rejection with the drawn tokens removed from the residual).

The profile (`profile`), p_1..p_K:
- "measured" (the default, the paper's: Sec. 3.1 fits the tree to the acceptance vector
  measured for the pair and sampling it runs with): the vector of the trial's pair, dtypes,
  temperature and top-p (and the draft's own sampling), measured once by an acceptance trial
  (engine/drafters/sequoia/profile.py measure_profile, run by the driver before the Sequoia
  trials: orchestrator/acceptance.py), stored in the database and attached to each Sequoia
  job as an explicit vector (`with_profile`). An unattached "measured" profile cannot build.
- "fixed" (a variant, for reproducing the earlier trials): DEFAULT_PROFILE, measured once on
  qwen2.5-coder-1.5b / -0.5b at temperature 0; it resolves to that vector, so those trials keep
  their config hashes.
- an explicit vector p_1, .., p_K (e.g. printed by bench/sequoia_profile.py).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch

from engine.config import ADDED_LATER
from engine.draft import DecodeState, TreeBuilder
from engine.sampling import draws_without_replacement
from engine.transfer import read_pair
from engine.tree import Tree, TreeSampling

# measure_profile(qwen2.5-coder-1.5b / 0.5b, first 6 Spec-Bench prompts with the chat template,
# 48 target tokens each, temperature 0, width 8): bench/sequoia_profile.py, 288 positions.
DEFAULT_PROFILE = (0.6875, 0.1215, 0.066, 0.0278, 0.0174, 0.0104, 0.0069, 0.0069)
MEASURED, FIXED = "measured", "fixed"  # the named profiles
MAX_WIDTH = 64  # K of a measured profile at most


# how this method draws siblings, at temperature 0 and above (engine/tree.py)
SAMPLING = TreeSampling(greedy="deterministic", sampled="without_replacement")


@dataclass(frozen=True)
class SequoiaConfig:
    budget: int = 64  # n: drafted nodes (Sequoia's tree sizes 64 / 128 ...)
    max_depth: int = 10  # D: depth bound of the dynamic program
    # p_1..p_K, acceptance by child rank: "measured" (the paper's), "fixed" (DEFAULT_PROFILE)
    # or explicit values (module docstring)
    profile: tuple[float, ...] | Literal["measured", "fixed"] = MEASURED
    width: int = field(default=8, metadata=ADDED_LATER)  # K: ranks a measured profile has

    def __post_init__(self) -> None:
        if self.budget < 1 or self.max_depth < 1:
            raise ValueError(
                f"budget and max_depth must be >= 1, got {self.budget}, {self.max_depth}"
            )
        if not 1 <= self.width <= MAX_WIDTH:
            raise ValueError(f"width must be in 1..{MAX_WIDTH}, got {self.width}")
        if self.profile == FIXED:
            object.__setattr__(self, "profile", DEFAULT_PROFILE)
        if self.profile == MEASURED:
            return
        if self.width != 8:
            raise ValueError("width is the length of a measured profile (profile: measured)")
        if (
            not isinstance(self.profile, tuple)
            or not self.profile
            or any(isinstance(p, bool) or not isinstance(p, (int, float)) for p in self.profile)
            or any(not 0.0 <= p <= 1.0 for p in self.profile)
            or sum(self.profile) > 1.0 + 1e-6
        ):
            raise ValueError(
                "profile must be measured, fixed, or a non-empty list of probabilities p_k "
                "in [0, 1] with sum <= 1"
            )

    @property
    def ranks(self) -> int:
        """K: the most children a node gets (the profile's length)."""
        return self.width if self.profile == MEASURED else len(self.profile)


def with_profile(cfg: SequoiaConfig, profile: tuple[float, ...]) -> SequoiaConfig:
    """`cfg` with a measured profile attached: its vector p_1..p_width (ValueError, one line,
    for a vector of another length or not probabilities)."""
    if cfg.profile != MEASURED:
        raise ValueError(f"sequoia: profile is {cfg.profile!r}, not measured")
    vector = tuple(float(p) for p in profile)
    if len(vector) != cfg.width:
        raise ValueError(
            f"sequoia: measured profile has {len(vector)} ranks, the config's width is {cfg.width}"
        )
    return dataclasses.replace(cfg, profile=vector, width=8)


def measured_first(cfg: SequoiaConfig) -> str | None:
    """What a sweep measures before this config runs (the record's `measured_first`)."""
    if cfg.profile != MEASURED:
        return None
    return "profile 'measured' is measured by a sweep's acceptance trial"


def vector(cfg: SequoiaConfig) -> tuple[float, ...]:
    """The profile the dynamic program runs on; ValueError for a measured one not attached."""
    if cfg.profile == MEASURED:
        raise ValueError(
            "sequoia: profile 'measured' has no vector attached (a sweep measures it in an "
            "acceptance trial first); pass profile=fixed or p_1,...,p_K to run it alone"
        )
    return cfg.profile


@functools.lru_cache(maxsize=64)
def optimal_shape(profile: tuple[float, ...], budget: int, max_depth: int) -> tuple[int, ...]:
    """Children count of every node of the optimal tree with at most `budget` drafted nodes
    and depth <= max_depth, nodes in BFS order (root first). "At most": a child is added only
    when it gains (p_k > 0), and a depth bound may leave budget unused."""
    m_max, k_max = budget, min(len(profile), budget)
    # numpy: many tiny reductions, which torch would hand to its thread pool
    f = np.zeros(m_max + 1)  # F(n, 0) = 0 over n = 0..m_max (n = 0 unused)
    choices = []  # per depth d = 1..D: [k_max, m_max + 1] chosen child subtree size (0 = stop)
    jj = np.arange(1, m_max + 1)  # child subtree sizes
    mm = np.arange(0, m_max + 1)  # nodes available to children i, i+1, ..
    diff = mm[:, None] - jj[None, :]  # [M + 1, M] nodes left after child i
    valid = diff >= 0
    left = np.clip(diff, 0, None)
    for _ in range(max_depth):
        h = np.zeros(m_max + 1)  # h_{K+1} = 0: no more children
        choice = np.zeros((k_max, m_max + 1), dtype=np.int64)
        for i in range(k_max - 1, -1, -1):
            a = profile[i] * (1.0 + f[jj])  # [M] child i with a j-node subtree
            cand = np.where(valid, a[None, :] + h[left], -np.inf)  # [M + 1, M]
            arg = cand.argmax(axis=-1)  # [M + 1]
            best = cand[mm, arg]
            take = best > 0.0  # stopping (no child i, hence none after) is worth 0
            choice[i] = np.where(take, jj[arg], 0)
            h = np.where(take, best, 0.0)
        f = np.concatenate([f[:1], h[:-1]])  # F(n, d) = h_1(n - 1) for n = 1..M
        choices.append(choice)
    shape, queue = [], [(budget + 1, max_depth)]  # (subtree size, depth budget), BFS order
    while queue:
        size, d = queue.pop(0)
        kids, m, i = [], size - 1, 0
        while d > 0 and m > 0 and i < k_max:
            j = int(choices[d - 1][i, m])
            if j == 0:
                break
            kids.append(j)
            m, i = m - j, i + 1
        shape.append(len(kids))
        queue += [(j, d - 1) for j in kids]
    return tuple(shape)


def expected_accepted(profile: tuple[float, ...], shape: tuple[int, ...]) -> float:
    """F(T) of a BFS children-count shape under the positional acceptance profile."""
    reach, total = [1.0], 0.0
    for u, c in enumerate(shape):
        for k in range(c):
            reach.append(reach[u] * profile[k])
            total += reach[-1]
    return total


def build(draft: TreeBuilder, state: DecodeState, cfg: SequoiaConfig, gen: torch.Generator) -> Tree:
    shape = optimal_shape(vector(cfg), cfg.budget, cfg.max_depth)
    first_child = [1]  # BFS index of the first child of every shape node
    for c in shape[:-1]:
        first_child.append(first_child[-1] + c)
    level = {0: 0}  # shape index -> builder node, one depth, BFS order
    while level and draft.depth[next(iter(level.values()))] < state.remaining:
        parents = [(s, u) for s, u in level.items() if shape[s] > 0]
        if not parents:
            break
        probs = draft.expand([u for _, u in parents])  # [n, V]
        tokens, q = draws_without_replacement(
            probs, max(shape[s] for s, _ in parents), state.draft_warp.greedy, gen
        )  # [n, k]
        q, tokens = read_pair(q, tokens)  # one host read
        level = {}
        for row, (s, u) in enumerate(parents):
            for k in range(min(shape[s], len(q[row]))):  # a missing draw (support
                if q[row][k] > 0:  # exhausted) drops its subtree
                    level[first_child[s] + k] = draft.add(u, tokens[row][k])
    return draft.tree(SAMPLING.at(state.draft_warp.greedy))
