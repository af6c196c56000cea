"""Paper-step checks of Khisti's truncated LP (engine/verify/khisti.py), exact (no Monte Carlo;
its output law is tested with every verifier in test_verifier_contract.py and
test_verifier_e2e.py). Hu & Huang's TV: test_verify_tv_alias.py.

Khisti et al. (ICLR 2025): the s-truncated LP of Sec. 4 / App. I solved by hand on V = 3, its
optimum against scipy's linprog on the LP as the paper writes it (w per ordered pair of
Omega_1, z_i <= p(i), z_i <= r_w(i)), and, without truncation and k = 2, the optimal acceptance
of their Thm. 3, min_S sum_S p + 1 - (sum_S q)^2, which no selection rule (our tournament
included) exceeds.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from scipy.optimize import linprog

from engine.verify import formulas, khisti

D = torch.float64


def _dist(g: torch.Generator, *shape: int, power: float = 2.0) -> torch.Tensor:
    x = torch.rand(*shape, generator=g, dtype=D) ** power
    return x / x.sum(-1, keepdim=True)


def _alpha(p: torch.Tensor, r: torch.Tensor) -> float:
    return float(torch.minimum(p, r).sum())


# ---- Khisti: the truncated LP -----------------------------------------------------------------


def test_truncated_lp_by_hand():
    """V = 3, k = 2, q = (.5, .3, .2), p = (.2, .5, .3). Ranked by p - q^2 = (-.05, .41, .26):
    tokens 1, 2, 0. s = 1: token 1 keeps every pair (r(1) = .09 + 2 * .3 * .7 = .51), token 2
    every pair with 0 (r(2) = .04 + 2 * .2 * .5 = .24), r(0) = .25: alpha = .2 + .5 + .24.
    s >= 2: the pair {1, 2} (mass .12) is split by the LP and covers the deficits of 1 and 2
    as far as it goes: alpha = .95, Khisti et al.'s Thm. 3 optimum (S = {0})."""
    p = torch.tensor([0.2, 0.5, 0.3], dtype=D)
    q = torch.tensor([0.5, 0.3, 0.2], dtype=D)
    one = khisti.importance_sample(p, q, 2, s=1)
    assert one.rounds[0].rank.tolist() == [2, 0, 1]
    assert torch.allclose(one.r, torch.tensor([0.25, 0.51, 0.24], dtype=D), atol=1e-15)
    assert _alpha(p, one.r) == pytest.approx(0.94, abs=1e-12)
    for s in (2, 3, 10):
        sel = khisti.importance_sample(p, q, 2, s=s)
        assert _alpha(p, sel.r) == pytest.approx(0.95, abs=1e-12), s
        assert sel.r[0] == pytest.approx(0.25, abs=1e-15)  # token 0 loses every duel
        assert float(sel.r.sum()) == pytest.approx(1.0, abs=1e-12)
    assert khisti.importance_sample(p, q, 1).r.equal(q)  # k = 1: naive speculative sampling


def _linprog_optimum(p, q1, q2, s):
    """The paper's truncated LP, literally: variables w[a, b] (a != b ranks in Omega_1: the
    probability of keeping the first-ranked of the pair X_1 = rank a, X_2 = rank b) and z_i;
    maximise sum z_i s.t. z_i <= p(i), z_i <= r_w(i), 0 <= w, z <= 1."""
    order = torch.sort(p - q1 * q2, descending=True, stable=True).indices
    ps, a, b = p[order].tolist(), q1[order].tolist(), q2[order].tolist()
    a_out, b_out = sum(a[s:]), sum(b[s:])
    pairs = [(i, j) for i in range(s) for j in range(s) if i != j]
    n = len(pairs)
    c = [0.0] * n + [-1.0] * s
    A, ub = [], []
    for i in range(s):
        row = [0.0] * (n + s)  # z_i <= p(i)
        row[n + i] = 1.0
        A.append(row)
        ub.append(ps[i])
        # z_i - (terms of r(i) in w) <= (the rest of r(i))
        row = [0.0] * (n + s)
        row[n + i] = 1.0
        rest = a[i] * b[i] + a[i] * b_out + a_out * b[i]
        for v, (x1, x2) in enumerate(pairs):
            if i not in (x1, x2):
                continue
            m = a[x1] * b[x2]  # P(X_1 = rank x1, X_2 = rank x2)
            if i == min(x1, x2):  # i first-ranked: kept with probability w
                row[v] -= m
            else:  # kept with probability 1 - w
                row[v] += m
                rest += m
        A.append(row)
        ub.append(rest)
    res = linprog(c, A_ub=A, b_ub=ub, bounds=[(0, 1)] * (n + s), method="highs")
    assert res.success
    return -res.fun, order[:s]


def test_truncated_lp_optimum_matches_linprog():
    """Our max-flow solution is feasible (0 <= w <= 1, r consistent with w) and reaches the
    optimum HiGHS finds for the LP as written, on random (p, q1, q2) and thresholds s."""
    g = torch.Generator().manual_seed(1)
    for trial in range(24):
        V, s = 8, 2 + trial % 6
        p, q1, q2 = _dist(g, V), _dist(g, V), _dist(g, V)
        rd = khisti.lp_round(p, q1, q2, s)
        want, top = _linprog_optimum(p, q1, q2, min(s, V))
        got = float(torch.minimum(p[top], rd.r[top]).sum())
        assert got == pytest.approx(want, abs=1e-9), (trial, s)
        w = torch.tensor(rd.w, dtype=D)
        assert bool(((w >= -1e-15) & (w <= 1 + 1e-15)).all())
        # r rebuilt from w: every pair keeps its first-ranked token with probability w
        ranked = torch.sort(p - q1 * q2, descending=True, stable=True).indices
        r = torch.zeros(V, dtype=D)
        for i, j in itertools.product(range(V), repeat=2):
            m = float(q1[ranked[i]] * q2[ranked[j]])
            lo, hi = min(i, j), max(i, j)
            keep = w[lo, hi].item() if hi < s and lo != hi else 1.0
            r[ranked[lo]] += m * keep
            r[ranked[hi]] += m * (1 - keep) if lo != hi else 0.0
        assert torch.allclose(r, rd.r, atol=1e-12), trial


def _theorem3(p: torch.Tensor, q: torch.Tensor) -> float:
    """Khisti et al. Thm. 3 (two i.i.d. drafts): min over S of sum_S p + 1 - (sum_S q)^2."""
    V = p.shape[0]
    return min(
        float(p[list(S)].sum()) + 1 - float(q[list(S)].sum()) ** 2
        for n in range(V + 1)
        for S in itertools.combinations(range(V), n)
    )


def test_untruncated_lp_is_optimal_and_bounds_every_selection_rule():
    """s >= V, k = 2: the LP's acceptance is the optimum of Thm. 3; the truncated LP (s = 2)
    and our tournament (another selection rule) reach at most that."""
    g = torch.Generator().manual_seed(2)
    for _ in range(30):
        p, q = _dist(g, 6, power=3.0), _dist(g, 6, power=3.0)
        best = _theorem3(p, q)
        full = _alpha(p, khisti.importance_sample(p, q, 2, s=6).r)
        assert full == pytest.approx(best, abs=1e-12)
        assert _alpha(p, khisti.importance_sample(p, q, 2, s=2).r) <= best + 1e-12
        assert formulas.acceptance("khisti_tournament", p, q, 2) <= best + 1e-12
