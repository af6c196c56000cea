"""khisti_tournament: Khisti et al.'s canonical decomposition (importance-weighted draft
selection, then single-draft speculative sampling; delayed-tree paper Appendix B.5, Algorithm 5)
with OUR selection step: a family of pairwise tournaments whose best member is found exactly in
O(V log V), in place of the paper's truncated linear program (engine/verify/khisti.py, the
default `khisti`). A named variant, lossless like the paper's: on the 24 random cases of
bench/khisti_acceptance.py its Algorithm-10 acceptance is higher than the truncated LP's in 13
(mean 0.886 vs 0.821), mostly at large V and k, where the LP's fixed order on the tokens
outside its s-token window costs most; with those solvers the paper's Table 2 ordering of
Khisti below SpecInfer and SpecTr need not hold.

    r <- importance_sample(p, q, k)               the law of the selected draft token
    x <- tournament over X_1..X_k                  pairwise duels, below
    Y <- NAIVE_OTLP_SOLVER(p, r, [x])              accept x w.p. min(1, p(x)/r(x)), else
                                                   Y ~ norm((p - r)_+)
Any selection rule whose output x is r-distributed over i.i.d. draws makes the last step output
p (Leviathan et al. 2023), so the scheme is lossless; the rule only decides how close r gets to
p, i.e. the acceptance sum_x min(p(x), r(x)) (Algorithm 10, a lower bound of the true acceptance
because a rejected step may still land on another draft token).

Tokens are ranked by the importance ratio p/q. The first draw is the incumbent; in round j the
incumbent meets draw j and, with probability lambda_j, the higher-ranked token wins (otherwise
the incumbent stays). The winner's law r_j is
    r_j = (1 - lambda_j) r_{j-1} + lambda_j r_prio,
    r_prio(x) = r_{j-1}(x)(1 - B(x)) + q(x)(1 - A(x)) - r_{j-1}(x) q(x),
with A, B the r_{j-1}- and q-mass ranked strictly above x; lambda_j maximises the overlap
sum_x min(p, r_j), a concave piecewise-linear function of lambda_j solved exactly by one sort of
its breakpoints. r_1 = q, so k = 1 is naive speculative sampling. The exact selection
probabilities given the draws (Algorithm 15) come from `selection_probs`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.tree import Tree
from engine.verify.common import Accept, canonical_verify, tournament_law

# tree samplings verified losslessly (engine/tree.py); read by engine/methods.py
MODES = ("iid",)


@dataclass(frozen=True)
class Selection:
    r: torch.Tensor  # [V] float64: law of the tournament winner over i.i.d. draws
    lambdas: tuple[float, ...]  # [k - 1] probability of a ranked duel in rounds 2..k
    rank: torch.Tensor  # [V] long: 0 = highest importance ratio p/q


def best_mix(p: torch.Tensor, r: torch.Tensor, d: torch.Tensor) -> float:
    """argmax over lambda in [0, 1] of sum_x min(p_x, r_x + lambda d_x). [V] float64 each.

    The right derivative at 0 is the sum of d over tokens below p (or at p and decreasing);
    every breakpoint t_x = (p_x - r_x)/d_x in (0, 1) lowers it by |d_x|; the maximum is the
    first breakpoint where it reaches <= 0 (1 if it never does)."""
    below = (r < p) | ((r == p) & (d < 0))
    slope0 = (d * below).sum()
    t = torch.where(d != 0, (p - r) / d, torch.inf)
    inner = (t > 0) & (t < 1)
    t = torch.where(inner, t, torch.inf)
    t, order = t.sort()
    left = slope0 - (d.abs() * inner)[order].cumsum(0)  # slope just after each breakpoint
    i = int((left <= 0).int().argmax())
    s0, ti, li = torch.stack([slope0, t[i], left[i]]).tolist()
    if s0 <= 0:
        return 0.0
    return ti if li <= 0 and ti < 1 else 1.0


def importance_sample(p: torch.Tensor, q: torch.Tensor, k: int) -> Selection:
    """KHISTI_IMPORTANCE_SAMPLE(p, q, k): the selection law r and the tournament that
    realises it. p, q: [V]. Works in priority order (sorted by p/q, descending)."""
    p64, q64 = p.double(), q.double()
    key = torch.where(q64 > 0, p64 / q64, -1.0)  # q = 0 tokens are never drawn: last
    order = torch.sort(key, descending=True, stable=True).indices  # [V] by priority
    ps, qs = p64[order], q64[order]  # sorted by priority
    b_above = qs.cumsum(0) - qs  # q-mass ranked strictly above
    rs, lambdas = qs, []
    for _ in range(k - 1):
        a_above = rs.cumsum(0) - rs
        prio = rs * (1 - b_above) + qs * (1 - a_above) - rs * qs  # ranked-duel winner law
        lam = best_mix(ps, rs, prio - rs)
        lambdas.append(lam)
        rs = rs + lam * (prio - rs)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.shape[0], device=order.device)
    return Selection(r=rs[rank], lambdas=tuple(lambdas), rank=rank)


def duel(sel: Selection, tokens: list[int]):
    """keep(j, a, b) of the tournament (engine/verify/common.py) among `tokens`: the incumbent
    a stays unless the challenger b is ranked higher and round j is a ranked duel (probability
    lambda_j)."""
    rank = dict(zip(tokens, sel.rank[tokens].tolist()))

    def keep(j: int, a: int, b: int) -> float:
        return 1.0 if rank[a] <= rank[b] else 1.0 - sel.lambdas[j - 1]

    return keep


def selection_probs(sel: Selection, counts: dict[int, int]) -> dict[int, float]:
    """P(tournament selects token t | the multiset of draws), averaged over the uniformly random
    order of the draws (the verifier shuffles them). counts: token -> multiplicity."""
    return tournament_law(counts, duel(sel, sorted(counts)))


def verify(tree: Tree, p: torch.Tensor, gen: torch.Generator) -> Accept:
    """Khisti et al.'s verification (`canonical_verify` in engine/verify/common.py) with the
    exact tournament above in place of the LP; p: [N, V], the tree drawn i.i.d. from tree.q."""
    return canonical_verify(tree, p, gen, "khisti_tournament", MODES, importance_sample, duel)
