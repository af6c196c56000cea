"""Khisti: multi-draft speculative sampling by canonical decomposition, with the importance
weights of the TRUNCATED linear program (Khisti et al., ICLR 2025, "Multi-draft speculative
sampling: canonical decomposition and theoretical limits", Sec. 4 "Faster importance weighted
speculative sampling" and the LP written out in its Appendix I); delayed-tree paper Appendix
B.5, Algorithm 5, with the acceptance lower bound of Algorithm 10. The construction the
delayed-tree paper's Table 2 measures. Our stronger tournament is the variant
`khisti_tournament` (engine/verify/khisti_tournament.py).

Canonical decomposition (Khisti et al. Sec. 3, Thm. 1): an importance-weighted step selects one
of the draft tokens, Y in {X_1..X_k}; single-draft speculative sampling then treats Y as a draft
drawn from its own law r: accept Y w.p. min(1, p(Y)/r(Y)), else draw from norm((p - r)_+). The
output follows p for any selection rule (Leviathan et al. 2023); the rule sets the acceptance
sum_x min(p(x), r(x)) (Algorithm 10: a lower bound, since a rejected step may still land on
another draft token). Algorithm 5:

    r <- KHISTI_IMPORTANCE_SAMPLE(p, q, k)       `importance_sample`: truncated LPs, below
    x <- KHISTI_TOURNAMENT_SELECT(r, X_1..X_k)   `tournament` with `duel`
    Y <- NAIVE_OTLP_SOLVER(p, r, [x])

Two drafts X_1 ~ q1, X_2 ~ q2 (independent). A selection rule gives each ordered pair of
distinct tokens the probability of keeping either one, and
    r(i) = q1(i) q2(i) + sum_{j != i} [q1(i) q2(j) beta_i(i, j) + q1(j) q2(i) beta_i(j, i)];
the LP maximises sum_i min(p(i), r(i)) over the beta's: O(V^2) variables. The truncation (Sec.
4, LP-truncation threshold s; s = 5 gave the best token rate in their Table 2): rank the tokens
by p(i) - q1(i) q2(i), largest first; Omega_1 = the s first, Omega_2 the rest. A pair with a
token in Omega_2 keeps its first-ranked token; only the pairs inside Omega_1 keep LP variables,
w[a][b] = P(keep the first-ranked token | the pair of ranks a < b), so that
    maximise  sum_{i in Omega_1} z_i   s.t.  z_i <= p(i),  z_i <= r_w(i),  0 <= w <= 1
(r on Omega_2 is fixed). Only the split of each pair's mass M_ij = q1(i) q2(j) + q1(j) q2(i)
between i and j matters, so the LP is a max-flow: pair mass flows to the tokens of Omega_1 to
cover their deficits (p(i) - base(i))_+; `_split_pairs` solves it exactly by augmenting paths
(tests check its optimum against scipy's linprog on the LP as written above). With s >= V there
is no truncation and, for k = 2, the acceptance is Khisti et al.'s optimum (Thm. 3).

k > 2 drafts ("pairwise tournament selection", delayed-tree paper App. B.5, as its authors'
public implementation does it): round j = 1..k-1 pairs the current winner, of law r_{j-1}
(r_0 = q), with the fresh draw X_{j+1} ~ q and solves the truncated LP for q1 = r_{j-1},
q2 = q; the winner of the duel has law r_j, and r = r_{k-1}. k = 1 gives r = q: naive
speculative sampling. The exact selection law given the draws (Algorithm 15) is
`selection_probs`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import torch

from engine.transfer import to_device
from engine.tree import Tree
from engine.verify.common import Accept, canonical_verify, positive_part, tournament_law

# tree samplings verified losslessly (engine/tree.py); read by engine/methods.py
MODES = ("iid",)
S = 5  # LP-truncation threshold s (Khisti et al. Sec. 4 and Table 2)
_EPS = 1e-15  # masses below this are zero in the max-flow


@dataclass(frozen=True)
class Round:
    """One duel of the tournament: the truncated LP for (q1, q2) = (r_{j-1}, q)."""

    rank: torch.Tensor  # [V] long: 0 = first-ranked (largest p - q1 q2)
    w: tuple[tuple[float, ...], ...]  # [s][s]: w[a][b], a < b, P(the rank-a token is kept)
    r: torch.Tensor  # [V] float64: law of the duel's winner


@dataclass(frozen=True)
class Selection:
    r: torch.Tensor  # [V] float64: law of the tournament winner over i.i.d. draws
    rounds: tuple[Round, ...]  # [k - 1]


def _split_pairs(deficit: list[float], mass: list[list[float]]) -> list[list[float]]:
    """Max-flow of the truncated LP: how much of each pair's mass mass[i][j] (i < j) goes to i
    and to j so that sum_i min(deficit_i, inflow_i) is largest. Returns held[i][j], the part of
    pair {i, j} held by i (held[i][j] + held[j][i] = mass[i][j]).

    Start with every pair at its first-ranked token; while some token with more than its
    deficit reaches a token short of it along pairs whose mass can move (i -> j while i holds
    part of {i, j}), move the bottleneck along the shortest such path (Edmonds-Karp). When no
    path is left, the tokens reachable from a surplus are covered and the others hold every
    pair they can: the optimum."""
    s = len(deficit)
    held = [[mass[i][j] if i < j else 0.0 for j in range(s)] for i in range(s)]
    inflow = [sum(row) for row in held]
    while True:
        prev = [-1] * s
        queue = deque(i for i in range(s) if inflow[i] > deficit[i] + _EPS)
        seen = set(queue)
        short = None
        while queue and short is None:
            i = queue.popleft()
            for j in range(s):
                if j not in seen and held[i][j] > _EPS:
                    seen.add(j)
                    prev[j] = i
                    if inflow[j] < deficit[j] - _EPS:
                        short = j
                        break
                    queue.append(j)
        if short is None:
            return held
        path, j = [], short
        while prev[j] >= 0:
            path.append((prev[j], j))
            j = prev[j]
        flow = min(inflow[j] - deficit[j], deficit[short] - inflow[short])
        flow = min([flow] + [held[a][b] for a, b in path])
        for a, b in path:
            held[a][b] -= flow
            held[b][a] += flow
        inflow[j] -= flow
        inflow[short] += flow


def lp_round(p: torch.Tensor, q1: torch.Tensor, q2: torch.Tensor, s: int = S) -> Round:
    """The s-truncated LP for two independent drafts X_1 ~ q1, X_2 ~ q2 (all [V] float64):
    its solution w and the law r of the selected token."""
    V = p.shape[0]
    s = min(s, V)
    order = torch.sort(p - q1 * q2, descending=True, stable=True).indices  # [V] ranked
    rank = torch.empty_like(order)
    rank[order] = torch.arange(V, device=order.device)
    a, b = q1[order], q2[order]  # [V] in rank order
    a_after = a.flip(0).cumsum(0).flip(0) - a  # q1-mass ranked after each token
    b_after = b.flip(0).cumsum(0).flip(0) - b
    r = a * b + a * b_after + a_after * b  # [V]: every pair keeps its first-ranked token
    a_out, b_out = a[s:].sum(), b[s:].sum()  # mass of Omega_2
    base = a[:s] * b[:s] + a[:s] * b_out + a_out * b[:s]  # [s]: what Omega_2 pairs give
    pair = a[:s, None] * b[None, :s] + b[:s, None] * a[None, :s]  # [s, s] M_ij
    deficit = positive_part(p[order[:s]] - base)
    held = _split_pairs(deficit.tolist(), pair.tolist())
    mass = pair.tolist()
    w = tuple(
        tuple(held[i][j] / mass[i][j] if i < j and mass[i][j] > 0 else 1.0 for j in range(s))
        for i in range(s)
    )
    top = base + to_device([sum(row) for row in held], r.device, r.dtype)
    r = torch.cat([top, r[s:]])
    return Round(rank=rank, w=w, r=r[rank])


def importance_sample(p: torch.Tensor, q: torch.Tensor, k: int, s: int = S) -> Selection:
    """KHISTI_IMPORTANCE_SAMPLE(p, q, k): one truncated LP per tournament round. p, q: [V]."""
    p64, q64 = p.double(), q.double()
    r, rounds = q64, []
    for _ in range(k - 1):
        rounds.append(lp_round(p64, r, q64, s))
        r = rounds[-1].r
    return Selection(r=r, rounds=tuple(rounds))


def duel(sel: Selection, tokens: list[int]):
    """keep(j, a, b) of the tournament (engine/verify/common.py) among `tokens`: in round j the
    incumbent a (law r_{j-1}) meets the draw b; inside Omega_1 the first-ranked of the two is
    kept with probability w, otherwise the first-ranked is kept."""
    ranks = [dict(zip(tokens, rd.rank[tokens].tolist())) for rd in sel.rounds]

    def keep(j: int, a: int, b: int) -> float:
        if a == b:
            return 1.0
        rd, ra, rb = sel.rounds[j - 1], ranks[j - 1][a], ranks[j - 1][b]
        s = len(rd.w)
        if ra < s and rb < s:
            w = rd.w[min(ra, rb)][max(ra, rb)]
            return w if ra < rb else 1.0 - w
        return 1.0 if ra < rb else 0.0

    return keep


def selection_probs(sel: Selection, counts: dict[int, int]) -> dict[int, float]:
    """P(tournament selects token t | the multiset of draws), averaged over the uniformly random
    order of the draws (the verifier shuffles them). counts: token -> multiplicity."""
    return tournament_law(counts, duel(sel, sorted(counts)))


def verify(tree: Tree, p: torch.Tensor, gen: torch.Generator) -> Accept:
    """Algorithm 5 with the truncated-LP selection above (`importance_sample`, `duel`) in the
    canonical decomposition (engine/verify/common.py `canonical_verify`). p: [N, V] target
    distribution after each node; tree drawn i.i.d. from tree.q."""
    return canonical_verify(tree, p, gen, "khisti", MODES, importance_sample, duel)
