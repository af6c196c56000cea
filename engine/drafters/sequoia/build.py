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

`measure_profile` measures p_1..p_K for a model pair (greedy: how often the target's token is
the draft's k-th choice along target continuations; sampling: Monte Carlo of the verifier). The
default profile was measured with it on qwen2.5-coder-1.5b / -0.5b at temperature 0 (see
DEFAULT_PROFILE); measure and pass your own for other pairs or temperatures
(bench/sequoia_profile.py prints the --param value).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch

from engine.draft import DecodeState, TreeBuilder
from engine.runtime.eager import CachedModel
from engine.sampling import Warp, draws_without_replacement, residual, warp
from engine.transfer import read_pair, to_device
from engine.tree import Tree, TreeSampling

# measure_profile(qwen2.5-coder-1.5b / 0.5b, first 6 Spec-Bench prompts with the chat template,
# 48 target tokens each, temperature 0, width 8): bench/sequoia_profile.py, 288 positions.
DEFAULT_PROFILE = (0.6875, 0.1215, 0.066, 0.0278, 0.0174, 0.0104, 0.0069, 0.0069)


# how this method draws siblings, at temperature 0 and above (engine/tree.py)
SAMPLING = TreeSampling(greedy="deterministic", sampled="without_replacement")


@dataclass(frozen=True)
class SequoiaConfig:
    budget: int = 64  # n: drafted nodes (Sequoia's tree sizes 64 / 128 ...)
    max_depth: int = 10  # D: depth bound of the dynamic program
    profile: tuple[float, ...] = DEFAULT_PROFILE  # p_1..p_K, acceptance by child rank

    def __post_init__(self) -> None:
        if self.budget < 1 or self.max_depth < 1:
            raise ValueError(
                f"budget and max_depth must be >= 1, got {self.budget}, {self.max_depth}"
            )
        if (
            not self.profile
            or any(not 0.0 <= p <= 1.0 for p in self.profile)
            or sum(self.profile) > 1.0 + 1e-6
        ):
            raise ValueError("profile must be non-empty probabilities p_k in [0, 1] with sum <= 1")


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
    shape = optimal_shape(cfg.profile, cfg.budget, cfg.max_depth)
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


@torch.inference_mode()
def measure_profile(
    pair,
    prompts: list[list[int]],
    new_tokens: int = 64,
    width: int = 8,
    temperature: float = 0.0,
    samples: int = 32,
    seed: int = 0,
) -> tuple[float, ...]:
    """p_1..p_width for a model pair: along target continuations of the prompts, the
    probability that the k-th child (rank k) of an accepted node is the accepted one."""
    gen = torch.Generator().manual_seed(seed)
    w = Warp(temperature)
    counts, positions = torch.zeros(width, dtype=torch.float64), 0
    t_model, d_model = pair.target.model, pair.draft.model
    for ids in prompts:
        seq, cached = list(ids), CachedModel(t_model)
        logits = cached.extend(seq)[-1]
        for _ in range(new_tokens):  # the target's own continuation
            seq.append(
                int(logits.argmax())
                if w.greedy
                else int(torch.multinomial(warp(logits, w).cpu(), 1, generator=gen))
            )
            logits = cached.extend(seq[-1:])[-1]
        x = to_device([seq], t_model.device)
        p = warp(t_model(input_ids=x).logits[0, len(ids) - 1 : -1].float().cpu(), w)  # [T, V]
        qd = d_model(input_ids=x.to(d_model.device)).logits[0, len(ids) - 1 : -1].float().cpu()
        q = torch.softmax(qd, -1) if w.greedy else warp(qd, w)  # [T, V]
        target_tok = torch.tensor(seq[len(ids) :])
        positions += target_tok.shape[0]
        if w.greedy:  # rank of the target's token among the draft's choices
            rank = (q > q.gather(-1, target_tok[:, None])).sum(-1)  # [T]
            counts += torch.bincount(rank[rank < width], minlength=width)[:width].double()
            continue
        for t in range(p.shape[0]):  # Monte Carlo of the verifier with `samples` draw sets
            tokens, _ = draws_without_replacement(q[t].expand(samples, -1), width, False, gen)
            for draws in tokens.tolist():
                k = _accepted_rank(p[t], q[t], draws, gen)
                if k is not None:
                    counts[k] += 1.0 / samples
    return tuple(round(float(c) / max(positions, 1), 4) for c in counts)


def _accepted_rank(
    p: torch.Tensor, q: torch.Tensor, draws: list[int], gen: torch.Generator
) -> int | None:
    """Which draw (without replacement, in draw order) SpecInfer-style rejection accepts:
    draw k is accepted with probability min(1, p_k(x_k) / q_k(x_k)), then p_{k+1} =
    norm((p_k - q_k)_+) and q_{k+1} = q_k without x_k; None if every draw is rejected."""
    p_res, q_res = p, q.clone()
    for k, x in enumerate(draws):
        if q_res[x] <= 0:
            return None
        if float(torch.rand((), generator=gen)) < min(1.0, float(p_res[x] / q_res[x])):
            return k
        p_res = residual(p_res, q_res)
        q_res[x] = 0.0
        q_res = q_res / q_res.sum().clamp(min=1e-30)
    return None
