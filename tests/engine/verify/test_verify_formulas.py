"""Exact checks of engine/verify/formulas.py and the solvers' building blocks (no Monte Carlo:
the verifiers themselves are checked against these formulas in test_verifier_contract.py).

Enumerating every tuple of k i.i.d. draws (V = 4 or 5, k <= 3) gives the acceptance rate as
E[sum of the branching probabilities of the draws' distinct tokens]; Algorithms 6-9 must equal
it and Algorithm 10 must bound it for Khisti (both selection steps). The Khisti selection law r
(per tournament round: the truncated LP's, or our tournament's closed form) must equal the
enumerated law of the tournament winner.
"""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
import torch

from engine.tree import make_tree
from engine.verify import bv, formulas, khisti, khisti_tournament, spectr, traversal

OT = ["nss", "naive_tree", "spectr", "specinfer", "khisti", "khisti_tournament"]


def _pairs(V: int, n: int, seed: int):
    """Random (p, q) rows, some with zeros (top-p-like) so that supports differ."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        p = torch.rand(V, generator=g, dtype=torch.float64) ** 2
        q = torch.rand(V, generator=g, dtype=torch.float64) ** 2
        if i % 2:
            p[i % V] = 0.0
            q[(i + 1) % V] = 0.0
        out.append((p / p.sum(), q / q.sum()))
    return out


def _enumerate(fn, q: torch.Tensor, k: int) -> float:
    """E over k i.i.d. draws from q of fn(Counter of the drawn tokens)."""
    total = 0.0
    for tup in itertools.product(range(q.shape[0]), repeat=k):
        prob = float(torch.prod(q[list(tup)]))
        if prob > 0:
            total += prob * fn(Counter(tup))
    return total


@pytest.mark.parametrize("name", OT)
def test_acceptance_equals_enumerated_branching(name):
    for p, q in _pairs(4, 6, seed=1):
        for k in (1, 2, 3):
            enum = _enumerate(lambda c: sum(formulas.branching(name, p, q, dict(c)).values()), q, k)
            alpha = formulas.acceptance(name, p, q, k)
            if name in formulas.KHISTI:  # Algorithm 10 is a lower bound
                assert alpha <= enum + 1e-12
            else:
                assert alpha == pytest.approx(enum, abs=1e-10), (name, k)


def test_acceptance_k1_is_naive_and_grows_with_k():
    for p, q in _pairs(5, 6, seed=2):
        naive = float(torch.minimum(p, q).sum())
        for name in ["naive_tree", "spectr", "specinfer", "khisti", "khisti_tournament"]:
            assert formulas.acceptance(name, p, q, 1) == pytest.approx(naive, abs=1e-12)
            a = [formulas.acceptance(name, p, q, k) for k in (1, 2, 3, 4)]
            assert all(x <= y + 1e-12 for x, y in zip(a, a[1:])), (name, a)


def test_branching_probabilities_are_subprobabilities():
    for p, q in _pairs(5, 4, seed=3):
        for counts in ({0: 1}, {1: 2, 3: 1}, {0: 1, 2: 1, 4: 1}):
            for name in OT:
                b = formulas.branching(name, p, q, counts)
                assert set(b) == set(counts)
                assert all(v >= -1e-12 for v in b.values()) and sum(b.values()) <= 1 + 1e-12


def test_rho_star_solves_the_kseq_equation():
    """rho* is the smallest rho in [1, k] with p_acc(rho) <= rho beta(rho) (Alg. 3 line 1),
    found against a plain bisection on the definition (Eq. 6-7)."""
    for i, (p, q) in enumerate(_pairs(6, 40, seed=4)):
        k = 2 + i % 4

        def g(rho):
            beta = float(torch.minimum(p / rho, q).sum())
            return 1 - (1 - beta) ** k - rho * beta

        lo, hi = 1.0, float(k)
        if g(lo) > 0:
            for _ in range(200):
                mid = (lo + hi) / 2
                lo, hi = (lo, mid) if g(mid) <= 0 else (mid, hi)
        else:
            hi = 1.0
        rho = spectr.rho_star(p, q, k)
        assert rho == pytest.approx(hi, abs=1e-9) and g(rho) <= 1e-12
    assert spectr.rho_star(*_pairs(4, 1, 0)[0], 1) == 1.0


@pytest.mark.parametrize("module", [khisti, khisti_tournament])
def test_khisti_selection_law_matches_the_tournament(module):
    """r from the per-round LPs (khisti) or closed form (khisti_tournament) = enumerated law of
    the tournament winner."""
    for p, q in _pairs(4, 6, seed=5):
        for k in (1, 2, 3, 4):
            sel = module.importance_sample(p, q, k)
            law = torch.zeros(4, dtype=torch.float64)
            for tup in itertools.product(range(4), repeat=k):
                prob = float(torch.prod(q[list(tup)]))
                if prob > 0:
                    for t, v in module.selection_probs(sel, dict(Counter(tup))).items():
                        law[t] += prob * v
            assert torch.allclose(law, sel.r, atol=1e-12)
            assert float(sel.r.sum()) == pytest.approx(1.0)


def test_khisti_mixing_weight_is_optimal():
    """best_mix maximises sum min(p, r + lambda d) over [0, 1] (checked on a fine grid)."""
    g = torch.Generator().manual_seed(6)
    for _ in range(30):
        p = torch.rand(7, generator=g, dtype=torch.float64)
        r = torch.rand(7, generator=g, dtype=torch.float64)
        p, r = p / p.sum(), r / r.sum()
        d = torch.rand(7, generator=g, dtype=torch.float64)
        d = d / d.sum() - r
        f = lambda lam: float(torch.minimum(p, r + lam * d).sum())  # noqa: E731
        grid = max(f(i / 2000) for i in range(2001))
        assert f(khisti_tournament.best_mix(p, r, d)) >= grid - 1e-12


def test_bv_and_traversal_agree_on_a_path():
    """Traversal Verification on a single path is block verification: E[tau] of the two
    independent implementations coincide."""
    g = torch.Generator().manual_seed(7)
    for L in (1, 2, 4):
        p = torch.rand(L + 1, 6, generator=g, dtype=torch.float64) ** 3
        q = torch.rand(L + 1, 6, generator=g, dtype=torch.float64) ** 3
        p, q = p / p.sum(-1, keepdim=True), q / q.sum(-1, keepdim=True)
        tokens = [int(torch.multinomial(q[i], 1, generator=g)) for i in range(L)]
        tree = make_tree([0] + tokens, [-1] + list(range(L)), q=q, sampling="iid")
        want = bv.expected_accepted(p, q, list(range(L + 1)), torch.tensor(tokens))
        assert traversal.expected_accepted(tree, p) == pytest.approx(want, abs=1e-12)
        assert formulas.block_efficiency(tree, p, "bv") == pytest.approx(1 + want, abs=1e-12)


def test_block_efficiency_of_a_known_tree():
    """Eq. 3 by hand: root -> a (and b); a -> c. NSS: 1 + p0(a) + p0(a) pa(c) + p0(b)."""
    p = torch.tensor(
        [[0.5, 0.3, 0.2], [0.1, 0.1, 0.8], [0.3, 0.3, 0.4], [1 / 3] * 3], dtype=torch.float64
    )
    q = torch.tensor([[0.4, 0.4, 0.2], [0.2, 0.2, 0.6], [0.0] * 3, [0.0] * 3], dtype=torch.float64)
    tree = make_tree([9, 0, 2, 1], [-1, 0, 1, 0], q=q, sampling="iid")  # a=0, c=2, b=1
    want = 1 + 0.5 + 0.5 * 0.8 + 0.3
    assert formulas.block_efficiency(tree, p, "nss") == pytest.approx(want)
    # greedy: argmax after root is 0 (a), after a is 2 (c), after c ... leaf
    assert formulas.block_efficiency(tree, p, "greedy") == 3.0
    # Eq. 1 estimator averages Eq. 2-3 over sampled trees
    assert formulas.expected_block_efficiency(lambda: (tree, p), "nss", s=4) == pytest.approx(want)
    with pytest.raises(ValueError):
        formulas.block_efficiency(tree, p, "no_such_verifier")
