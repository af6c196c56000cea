"""`tv` (Hu & Huang, ICML 2024, Accelerated Speculative Sampling, ASpS) is an alias of `bv`
(engine/verify/__init__.py): checked against ASpS's own steps, not against our docstring.

`asps` below transcribes the algorithm as the authors' public implementation runs it (lib.py
`tmc_sample`, which its README cites as the paper's ASpS; their notation: the target `P`, the
reference (draft) model `Q`, `Plessapprox` the unnormalised law over the outputs, `C1`, `C2`,
the entry that continues the draft path). It is a separate small reference in probability
space, not a call into engine code. The tests: the hand-computed example of Sun et al. 2024c
(Sec. 1, two tokens, context-free models): ASpS's law per draft path and its E[tau] = 11/9
against naive speculative sampling's 10/9; on every draft path of random worlds, ASpS's joint
law of (accepted tokens, next token) equals block verification's (engine/verify/bv.py); the
registry resolves `tv` to `bv` (hash included) and trials stored with `tv` still certify and
score.
"""

from __future__ import annotations

import itertools
from fractions import Fraction as F

import pytest
import torch

from engine.methods import method_params, resolve_method
from engine.tree import Tree
from engine.verify import ALIASES, VERIFIERS, bv, canonical, formulas
from orchestrator.records import TrialConfig
from orchestrator.results.certificates import trial_setting

D = torch.float64


def asps(P: list, Q: list, a: list[int]) -> dict[tuple[int, int], float]:
    """ASpS (tmc_sample) on one draft path a_0..a_{L-1} ~ Q with target rows P[i] = p(.|a_<i)
    and draft rows Q[i] (lists of V numbers, exact Fractions or floats): the law of the output
    as {(tau, token): mass}, tau the drafted tokens kept, token the one emitted after them
    (None for tau = L: the bonus is then drawn from p(.|a), as gen_tmc does)."""
    L, V = len(a), len(P[0])
    less = [[0 * P[0][0]] * V for _ in range(L)]  # Plessapprox [L, V]
    w = 1 + 0 * P[0][0]  # Plessapprox_sigma_sigma: the entry that continues the path
    for i in range(L):
        if i:
            less[i - 1][a[i - 1]] = 0 * w  # the path entry becomes this row
        c1 = [max(Q[i][v] - w * P[i][v], 0 * w) for v in range(V)]  # C1 = (Q - w P)_+
        t1 = c1[a[i]] / sum(c1) / Q[i][a[i]] if sum(c1) > 0 else 1 + 0 * w  # C2(a_i) / Q(a_i)
        less = [[x * t1 for x in row] for row in less]
        less[i] = [t1 * max(w * P[i][v] - Q[i][v], 0 * w) for v in range(V)]
        w = min(1 + 0 * w, P[i][a[i]] / Q[i][a[i]] * w)  # _t2
        less[i][a[i]] = w
    total = sum(sum(row) for row in less)  # the final softmax: a normalisation
    out = {}
    for i, v in itertools.product(range(L), range(V)):
        if less[i][v] > 0:
            whole = i == L - 1 and v == a[-1]
            out[(L, None) if whole else (i, v)] = less[i][v] / total
    return out


def bv_law(p: torch.Tensor, q: torch.Tensor, a: list[int]) -> dict[tuple[int, int], float]:
    """The same law from engine/verify/bv.py's acceptance probabilities and residuals."""
    L = len(a)
    _, h, res = bv.chain_terms(p, q, list(range(L + 1)), torch.tensor(a))
    out, deeper = {}, 1.0
    for i in range(L, -1, -1):
        stop = (h[i] if i > 0 else 1.0) * deeper
        deeper *= 1 - h[i] if i > 0 else 1.0
        if i == L:
            out[(L, None)] = stop
            continue
        row = res[i] / max(float(res[i].sum()), 1e-300)
        for v in range(p.shape[1]):
            if stop * float(row[v]) > 0:
                out[(i, v)] = stop * float(row[v])
    return {k: m for k, m in out.items() if m > 1e-15}


# Sun et al. 2024c, Sec. 1: V = {a, b}, target (1/3, 2/3), draft (2/3, 1/3) in every context
P2, Q2 = [F(1, 3), F(2, 3)], [F(2, 3), F(1, 3)]
HAND = {  # per draft path: the output law, computed by hand from ASpS's steps
    (0, 0): {(0, 1): F(3, 4), (2, None): F(1, 4)},  # C1 = (1/3, 0), t1 = 3/2; then w = 1/4
    (0, 1): {(2, None): F(1)},  # C1(b) = 0 at the second token: t1 = 0, w = 1
    (1, 0): {(1, 1): F(1, 2), (2, None): F(1, 2)},
    (1, 1): {(2, None): F(1)},
}


def test_asps_by_hand_on_the_block_verification_example():
    """ASpS's steps give the hand-computed laws, E[tau] = 11/9 over the draft paths (naive
    speculative sampling: 2/3 + 4/9 = 10/9), and bv.py gives the same laws."""
    e_tau = 0
    for path, law in HAND.items():
        assert asps([P2, P2], [Q2, Q2], list(path)) == law, path
        got = bv_law(torch.tensor([P2] * 3, dtype=D), torch.tensor([Q2] * 3, dtype=D), list(path))
        assert got.keys() == law.keys() and all(
            got[k] == pytest.approx(float(m), abs=1e-12) for k, m in law.items()
        ), path
        prob = Q2[path[0]] * Q2[path[1]]
        e_tau += prob * sum(tau * m for (tau, _), m in law.items())
    assert e_tau == F(11, 9)


def _world(g: torch.Generator, V: int, L: int):
    """Target and draft rows for every context of up to L tokens (V-ary heap numbering)."""
    n = sum(V**d for d in range(L + 1))
    p, q = torch.rand(n, V, generator=g, dtype=D) ** 2, torch.rand(n, V, generator=g, dtype=D) ** 2
    return p / p.sum(-1, keepdim=True), q / q.sum(-1, keepdim=True)


def test_asps_law_is_block_verifications_on_every_path():
    """V = 3, L = 3, every draft path of 8 random worlds: ASpS's joint law of (tau, token) is
    BV's; summed over the paths (weights q), E[tau] exceeds naive speculative sampling's."""
    V, L = 3, 3
    g = torch.Generator().manual_seed(7)
    for _ in range(8):
        P, Q = _world(g, V, L)
        e_asps = e_naive = 0.0
        for path in itertools.product(range(V), repeat=L):
            ctx = [0]
            for t in path:
                ctx.append(ctx[-1] * V + 1 + t)
            p, q = P[ctx], Q[ctx]
            law = asps(p[:L].tolist(), q[:L].tolist(), list(path))
            want = bv_law(p, q, list(path))
            assert law.keys() == want.keys(), path
            assert all(law[k] == pytest.approx(want[k], abs=1e-12) for k in law), path
            prob = float(q[range(L), list(path)].prod())
            e_asps += prob * sum(tau * m for (tau, _), m in law.items())
            ratio = (p[range(L), list(path)] / q[range(L), list(path)]).clamp(max=1.0)
            e_naive += prob * float(ratio.cumprod(0).sum())
        assert e_asps > e_naive + 1e-6


def test_tv_resolves_to_bv():
    """`verifier: tv` resolves to bv (so a sweep's tv trial is bv's, one hash); tv is no
    registry entry of its own, an unknown name lists it as the alias it is."""
    assert ALIASES == {"tv": "bv"} and "tv" not in VERIFIERS and canonical("tv") == "bv"
    tv = resolve_method("iid", {"verifier": "tv"}, 0.6)
    assert tv.verifier == "bv"
    assert method_params(tv) == method_params(resolve_method("iid", {"verifier": "bv"}, 0.6))
    with pytest.raises(Exception, match=r"tv \(= bv\)"):
        resolve_method("iid", {"verifier": "tw"}, 0.6)


def test_stored_tv_trials_still_certify_and_score():
    """A trial stored with verifier tv (delayed-verifiers-scaled) keeps its certificate's
    setting under its own name (the stored distribution checks are keyed tv), and the
    block-efficiency formula scores tv as bv."""
    cfg = TrialConfig(
        target="tiny-llama",
        draft="tiny-llama-draft",
        dataset="spec_bench",
        prompts=1,
        method="iid",
        params={"K": 2, "L": 4, "verifier": "tv"},
        max_new_tokens=8,
        temperature=0.6,
    )
    setting = trial_setting(cfg)
    assert setting is not None and setting.verifier == "tv"
    q = torch.tensor([[0.6, 0.4], [0.5, 0.5], [0.3, 0.7]], dtype=torch.float32)
    tree = Tree(
        tokens=torch.tensor([0, 0, 1]),
        parents=torch.tensor([-1, 0, 1]),
        depth=torch.tensor([0, 1, 2]),
        q=q,
        sampling="iid",
    )
    p = torch.tensor([[0.3, 0.7], [0.6, 0.4], [0.5, 0.5]], dtype=torch.float32)
    assert formulas.block_efficiency(tree, p, "tv") == formulas.block_efficiency(tree, p, "bv")
