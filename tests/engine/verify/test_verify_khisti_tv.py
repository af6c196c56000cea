"""Paper-step checks of Khisti's truncated LP (engine/verify/khisti.py) and of Hu & Huang's tree
verification (engine/verify/tv.py), exact (no Monte Carlo; their output laws are tested with
every verifier in test_verifier_contract.py and test_verifier_e2e.py).

Khisti et al. (ICLR 2025): the s-truncated LP of Sec. 4 / App. I solved by hand on V = 3, its
optimum against scipy's linprog on the LP as the paper writes it (w per ordered pair of
Omega_1, z_i <= p(i), z_i <= r_w(i)), and, without truncation and k = 2, the optimal acceptance
of their Thm. 3, min_S sum_S p + 1 - (sum_S q)^2, which no selection rule (our tournament
included) exceeds. Hu & Huang (ICML 2024): E[tau] of ASpS at least naive speculative
sampling's (their claim; delayed-tree paper Sec. 3.1) and at most block verification's (Sun et
al. 2024c, optimal among single-path verifiers), with the exact law of the first two emitted
tokens equal to the target's.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from scipy.optimize import linprog

from engine.verify import bv, formulas, khisti, tv

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


# ---- TV: Hu & Huang's accelerated speculative sampling ----------------------------------------

V, L = 3, 3


def _world(g: torch.Generator):
    """Target and draft rows for every context of up to L tokens (V-ary heap numbering)."""
    n = sum(V**d for d in range(L + 1))
    return _dist(g, n, V), _dist(g, n, V)


def _paths():
    """Every draft path of L tokens: (tokens, contexts root..a_{1:L})."""
    for path in itertools.product(range(V), repeat=L):
        ctx = [0]
        for t in path:
            ctx.append(ctx[-1] * V + 1 + t)
        yield torch.tensor(path), ctx


def test_tv_expected_accepted_between_naive_and_bv():
    """E[tau] over draft paths a ~ q, exactly: naive <= TV (Hu & Huang) = BV (Sun et al.
    2024c); on a one-token path TV is naive."""
    g = torch.Generator().manual_seed(3)
    nodes = list(range(L + 1))
    strict = 0
    for _ in range(20):
        P, Q = _world(g)
        e = {"naive": 0.0, "tv": 0.0, "bv": 0.0}
        for tokens, ctx in _paths():
            p, q = P[ctx], Q[ctx]
            prob = float(q[nodes[:-1], tokens].prod())
            ratio = (p[nodes[:-1], tokens] / q[nodes[:-1], tokens]).clamp(max=1.0)
            e["naive"] += prob * float(ratio.cumprod(0).sum())
            e["tv"] += prob * tv.expected_accepted(p, q, nodes, tokens)
            e["bv"] += prob * bv.expected_accepted(p, q, nodes, tokens)
            one = tv.expected_accepted(p, q, nodes[:2], tokens[:1])
            assert one == pytest.approx(float(ratio[0]), abs=1e-12)
        assert e["naive"] <= e["tv"] + 1e-12 and e["tv"] == pytest.approx(e["bv"], abs=1e-12), e
        strict += e["tv"] > e["naive"] + 1e-6
    assert strict >= 15  # a real gain, not equality


def _asps_walk(p, q, tokens) -> list[float]:
    """Hu & Huang's walk as the module docstring of engine/verify/tv.py states it, step by
    step: at node i, C1 = (Q_i - w P_i)_+, C2 = C1(a_(i+1)) / sum(C1); the earlier stops and
    the new stop row (w P_i - Q_i)_+ are scaled by C2 / Q_i(a_(i+1)); w <- min(1, w P/Q);
    after the last node, the row w P_L. Returns the stop masses s_0..s_L."""
    w, stops = 1.0, []
    for i, a in enumerate(tokens.tolist()):
        P, Q = p[i], q[i]
        c1 = (Q - w * P).clamp(min=0)
        scale = float(c1[a]) / float(c1.sum()) / float(Q[a])
        stops = [m * scale for m in stops] + [float((w * P - Q).clamp(min=0).sum()) * scale]
        w = min(1.0, w * float(P[a]) / float(Q[a]))
    return stops + [w]


def test_tv_is_the_asps_walk_with_block_verifications_law():
    """On every draft path of random worlds, tv.neighbour's closed form (s_i = R_i c_i
    prod_(j>i) c_j) gives the stop probabilities of the walk done step by step, and they are
    block verification's h_i prod_(j>i) (1 - h_j), with BV's correction rows: TV's law of
    (tau, correction) is BV's exactly (engine/verify/tv.py); only the draws differ."""
    g = torch.Generator().manual_seed(5)
    nodes = list(range(L + 1))
    for _ in range(5):
        P, Q = _world(g)
        for tokens, ctx in _paths():
            p, q = P[ctx], Q[ctx]
            stop, res = tv.neighbour(p, q, nodes, tokens)
            assert stop == pytest.approx(_asps_walk(p, q, tokens), abs=1e-12)
            _, h, res_bv = bv.chain_terms(p, q, nodes, tokens)
            deeper, law = 1.0, [0.0] * (L + 1)
            for i in range(L, 0, -1):
                law[i], deeper = h[i] * deeper, deeper * (1 - h[i])
            law[0] = deeper
            assert stop == pytest.approx(law, abs=1e-12)
            assert torch.allclose(res, res_bv, atol=1e-12)


def test_tv_output_law_is_exactly_the_target():
    """Summing the neighbour distribution over every draft path: the first two emitted tokens
    (a second step from p after a one-token output) follow p exactly."""
    g = torch.Generator().manual_seed(4)
    nodes = list(range(L + 1))
    for _ in range(4):
        P, Q = _world(g)
        law = torch.zeros(V, V, dtype=D)
        for tokens, ctx in _paths():
            p, q = P[ctx], Q[ctx]
            prob = float(q[nodes[:-1], tokens].prod())
            stop, res = tv.neighbour(p, q, nodes, tokens)
            assert sum(stop) == pytest.approx(1.0, abs=1e-12)
            for tau, s in enumerate(stop):
                row = p[L] if tau == L else res[tau] / max(float(res[tau].sum()), 1e-300)
                for y in range(V):
                    out = tokens[:tau].tolist() + [y]
                    mass = prob * s * float(row[y])
                    if len(out) >= 2:
                        law[out[0], out[1]] += mass
                    else:  # the next verification starts after y: its first token ~ p
                        law[y] += mass * P[1 + y]
        assert torch.allclose(law, P[0][:, None] * P[1 : 1 + V], atol=1e-12)
