"""SpecTr: the K-SEQ OTLP solver (Sun et al. 2023) used top-down on i.i.d. trees; delayed-tree
paper Appendix B.3, Algorithm 3 and Eq. 6-7.

For draws X_1..X_k ~ q at a node, with division factor rho,
    beta(rho) = sum_x min(p(x)/rho, q(x))                     (Eq. 6)
    p_acc(rho) = 1 - (1 - beta(rho))^k                        (Eq. 7)
K-SEQ accepts X_i (in order) when rho * U_i <= p(X_i)/q(X_i) and otherwise samples from
    p_res = norm((p - gamma * min(p/rho, q))_+),  gamma = p_acc / beta.
The output follows p whenever p_acc(rho) <= rho * beta(rho); rho* is the root of
p_acc(rho) - rho * beta(rho), decreasing on [1, k] (Alg. 3 line 1), and gives the best
acceptance. We find it exactly: beta is A/rho + B between consecutive breakpoints p(x)/q(x), so
one sort locates the segment holding the root and a scalar bisection finishes inside it, always
returning the feasible side (g(rho) <= 0) so that the residual is non-negative. k = 1 gives
rho* = 1, the naive solver. Acceptance: Algorithm 8; branching: Algorithm 13.
"""

from __future__ import annotations

import torch

from engine.tree import Tree
from engine.verify.common import (
    Accept,
    layout,
    positive_part,
    require,
    sample_index,
    shuffled_draws,
    top_down,
)

# tree samplings verified losslessly (engine/tree.py); read by engine/methods.py
MODES = ("iid",)


def rho_star(p: torch.Tensor, q: torch.Tensor, k: int) -> float:
    """The division factor rho* in [1, k] solving p_acc(rho) = rho * beta(rho). p, q: [V]."""
    if k <= 1:
        return 1.0
    p, q = p.double(), q.double()
    # breakpoints p/q ascending; q = 0 tokens (never drawn, min(p/rho, 0) = 0) go last
    ratio, order = torch.where(q > 0, p / q, torch.inf).sort()  # [V]
    ps, qs = p[order], q[order]
    cum_p, cum_q = ps.cumsum(0), qs.cumsum(0)  # mass of tokens with ratio <= breakpoint
    # beta at each breakpoint rho_j: tokens with ratio <= rho_j give p / rho_j, the others q
    beta = cum_p / ratio.clamp(min=1.0) + (cum_q[-1] - cum_q)  # [V]
    g_bp = 1 - (1 - beta).clamp(min=0) ** k - ratio * beta
    feasible = (ratio > 1) & (ratio < k) & (g_bp <= 0)
    j = int(feasible.int().argmax())  # first feasible breakpoint inside (1, k), if any
    # the segment (lo, hi) just below it: beta(rho) = a / rho + b there
    hi = torch.where(feasible[j], ratio[j], float(k))
    below = ratio < hi
    a, b, lo, hi = torch.stack(
        [
            (ps * below).sum(),
            (qs * ~below).sum(),
            torch.where(below, ratio, 1.0).max().clamp(min=1.0),
            hi,
        ]
    ).tolist()

    def g(rho: float) -> float:
        beta = a / rho + b
        return 1 - max(1 - beta, 0.0) ** k - rho * beta

    if g(lo) <= 0:
        return lo
    while hi - lo > 1e-13 * hi:
        mid = 0.5 * (lo + hi)
        if g(mid) <= 0:
            hi = mid
        else:
            lo = mid
    return hi


def kseq(p: torch.Tensor, q: torch.Tensor, k: int) -> tuple[float, float, float, torch.Tensor]:
    """rho*, beta, p_acc and the unnormalised residual (p - gamma min(p/rho*, q))_+ [V]."""
    rho = rho_star(p, q, k)
    p64, q64 = p.double(), q.double()
    overlap = torch.minimum(p64 / rho, q64)  # [V]
    beta = float(overlap.sum())
    p_acc = 1 - (1 - beta) ** k
    gamma = p_acc / beta if beta > 0 else float(k)
    return rho, beta, p_acc, positive_part(p64 - gamma * overlap)


def verify(tree: Tree, p: torch.Tensor, gen: torch.Generator) -> Accept:
    """p: [N, V] target distribution after each node; tree drawn i.i.d. from tree.q."""
    require(tree, MODES, "spectr")
    lay = layout(tree, distinct=True)
    q = tree.q

    def solve(node, us):
        draws = shuffled_draws(lay, node, us)  # X_1..X_k as child nodes, i.i.d. order
        p64, q64 = p[node].double(), q[node].double()  # [V]
        rho, _, _, res = kseq(p64, q64, len(draws))
        x = tree.tokens[draws]  # [k]
        ratio = (p64[x] / (rho * q64[x])).tolist()  # [k] p(X_i) / (rho* q(X_i))
        for c, r in zip(draws, ratio):
            if next(us) <= r:  # rho* U_i <= p(X_i)/q(X_i)
                return lay.tokens[c]
        return sample_index(res, next(us))

    return top_down(tree, p, lay, gen, solve)
