"""Acceptance rates, branching probabilities and expected block efficiency of the verifiers
(delayed-tree paper, Sec. 5, Eq. 1-3, Appendix C Algorithms 6-10 and D Algorithms 11-15).

- Acceptance rate (Def. 5.1): alpha(f_{p,q,k}) = P(f(X_1..X_k) in {X_1..X_k}) over i.i.d.
  X_i ~ q. `acceptance(name, p, q, k)`; for Khisti the lower bound of Algorithm 10.
- Branching probability (Def. 5.3): B(f, ch, t) = P(f(ch) = t) for a given child list.
  `branching(name, p, q, counts, ...)` returns it for every child token. The verifiers draw the
  order of i.i.d. draws uniformly at random (engine/verify/common.py), so for the order-dependent
  solvers (NaiveTree's X_1, SpecTr's K-SEQ, SpecInfer, Khisti's tournament) the branching here is
  Algorithm 12-15 averaged over that order: exactly the law our verifiers follow given the tree.
- Block efficiency (Eq. 1-3): E[tau + 1 | T] = 1 + sum over non-root nodes of the product of
  branching probabilities along the path (`block_efficiency`, Eq. 2-3), and the paper's
  estimator of E_T[.] as a mean over s sampled trees (`expected_block_efficiency`, Eq. 1, s = 4).
  The single-path and bottom-up verifiers are not OT-based; for them E[tau + 1 | T] is exact too:
  naive (product of min(1, p/q) along the path), bv (Sun et al. 2024c; tv, Hu & Huang's ASpS,
  is its alias: engine/verify/__init__.py) and traversal (the recursion of
  engine/verify/traversal.py), averaged over the rollout they verify.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable

import torch

from engine.sampling import residual
from engine.transfer import to_device
from engine.tree import Tree
from engine.verify import bv, canonical, khisti, khisti_tournament, specinfer, spectr, traversal
from engine.verify.common import layout, positive_part

OT_BASED = ("nss", "naive_tree", "spectr", "specinfer", "khisti", "khisti_tournament")
KHISTI = {"khisti": khisti, "khisti_tournament": khisti_tournament}  # Algorithm 5, two ways


# ---- acceptance rates (Appendix C) -----------------------------------------------------------


def acceptance(name: str, p: torch.Tensor, q: torch.Tensor, k: int) -> float:
    """alpha for k i.i.d. draws from q at a node with target p (both [V])."""
    p, q = p.double(), q.double()
    if name == "nss":  # Algorithm 6
        return float((p * (1 - (1 - q) ** k)).sum())
    if name in ("naive_tree", "naive"):  # Algorithm 7 (naive: k = 1)
        k = 1 if name == "naive" else k
        return float(
            torch.minimum(p, q).sum() + (positive_part(p - q) * (1 - (1 - q) ** (k - 1))).sum()
        )
    if name == "spectr":  # Algorithm 8
        rho, beta, p_acc, res = spectr.kseq(p, q, k)
        if p_acc >= 1 or beta >= 1:
            return p_acc
        r = positive_part(q - p / rho) / (1 - beta)
        p_res = res / res.sum()
        return float(p_acc + (1 - p_acc) * (p_res * (1 - (1 - r) ** k)).sum())
    if name == "specinfer":  # Algorithm 9
        p_rej, m = 1.0, torch.ones_like(p)
        for _ in range(k):
            r = float(torch.minimum(p, q).sum())
            p_rej *= 1 - r
            if r < 1:
                m = m * (1 - positive_part(q - p) / (1 - r))
            p = residual(p, q)
        return float((1 - p_rej) + p_rej * (p * (1 - m)).sum())
    if name in KHISTI:  # Algorithm 10 (a lower bound)
        return float(torch.minimum(p, KHISTI[name].importance_sample(p, q, k).r).sum())
    raise ValueError(f"no acceptance formula for verifier {name!r} (OT-based: {OT_BASED})")


# ---- branching probabilities (Appendix D) ----------------------------------------------------


def _random_order_average(
    counts: dict[int, int], accept: Callable[[int, int], float], final: dict[int, float]
) -> dict[int, float]:
    """Output law of a solver that tries the draws in uniformly random order, accepting draw
    t in round i with probability accept(i, t), and samples `final` when all are rejected
    (restricted to the child tokens). The multiset recursion of Algorithm 14."""
    tokens = sorted(counts)
    k = sum(counts.values())

    @lru_cache(maxsize=None)
    def law(left: tuple[int, ...]) -> tuple[float, ...]:
        n = sum(left)
        if n == 0:
            return tuple(final.get(t, 0.0) for t in tokens)
        out = [0.0] * len(tokens)
        for j, m in enumerate(left):
            if m == 0:
                continue
            a = accept(k - n, tokens[j])
            rest = law(left[:j] + (m - 1,) + left[j + 1 :])
            for i in range(len(tokens)):
                out[i] += m / n * ((1 - a) * rest[i] + (a if i == j else 0.0))
        return tuple(out)

    return dict(zip(tokens, law(tuple(counts[t] for t in tokens))))


def _naive_branching(
    p: torch.Tensor, q: torch.Tensor, first: int, tokens: list[int]
) -> dict[int, float]:
    """Algorithm 12 for a given first draw."""
    a = min(1.0, float(p[first] / q[first]))
    p_res = residual(p, q)[tokens].tolist()
    return {t: (1 - a) * pr + (a if t == first else 0.0) for t, pr in zip(tokens, p_res)}


def branching(
    name: str,
    p: torch.Tensor,
    q: torch.Tensor,
    counts: dict[int, int],
    order: list[int] | None = None,
) -> dict[int, float]:
    """B(f, ch, t) for every child token t of a node: p, q [V]; counts: token -> multiplicity.
    order: the draw order of a without-replacement node (then the solver follows it)."""
    p, q = p.double(), q.double()
    tokens = sorted(counts)
    k = sum(counts.values())
    if name == "nss":  # Algorithm 11
        return dict(zip(tokens, p[tokens].tolist()))
    if name == "naive_tree":  # Algorithm 12, X_1 = the first draw
        if order is not None:
            return _naive_branching(p, q, order[0], tokens)
        out = dict.fromkeys(tokens, 0.0)
        for first, m in counts.items():
            for t, b in _naive_branching(p, q, first, tokens).items():
                out[t] += m / k * b
        return out
    if name == "spectr":  # Algorithm 13
        rho, _, _, res = spectr.kseq(p, q, k)
        mass = float(res.sum())
        final = dict(zip(tokens, (res[tokens] / mass if mass > 0 else p[tokens]).tolist()))
        a = {t: min(1.0, v) for t, v in zip(tokens, (p[tokens] / (rho * q[tokens])).tolist())}
        return _random_order_average(counts, lambda i, t: a[t], final)
    if name == "specinfer":  # Algorithm 14
        if order is not None:  # without replacement: the draws are tried in draw order
            x = to_device(order, p.device)
            qs = specinfer.round_drafts(q, x, iid=False)
            ps = specinfer.round_targets(p, qs)
            rounds = torch.arange(len(order), device=p.device)
            a = (ps[rounds, x] / qs[rounds, x]).tolist()
            out, reach = dict.fromkeys(tokens, 0.0), 1.0
            for t, ai in zip(order, a):
                out[t] += reach * min(1.0, ai)
                reach *= 1 - min(1.0, ai)
            for t, v in zip(tokens, ps[-1, tokens].tolist()):
                out[t] += reach * v
            return out
        ps = specinfer.round_targets(p, q.expand(k, -1))  # [k + 1, V]
        a = (ps[:k, tokens] / q[tokens]).clamp(max=1.0).tolist()  # [k, D]
        col = {t: j for j, t in enumerate(tokens)}
        final = dict(zip(tokens, ps[k, tokens].tolist()))
        return _random_order_average(counts, lambda i, t: a[i][col[t]], final)
    if name in KHISTI:  # Algorithm 15
        sel = KHISTI[name].importance_sample(p, q, k)
        out = dict.fromkeys(tokens, 0.0)
        for x, pi in KHISTI[name].selection_probs(sel, counts).items():
            for t, b in _naive_branching(p, sel.r, x, tokens).items():
                out[t] += pi * b
        return out
    raise ValueError(f"no branching formula for verifier {name!r} (OT-based: {OT_BASED})")


# ---- block efficiency (Eq. 1-3) --------------------------------------------------------------


def _chains(tree: Tree) -> list[tuple[float, list[int]]]:
    """The root-to-leaf paths a single-path verifier may verify, with their probabilities."""
    lay = layout(tree)
    if tree.sampling != "iid":
        chain, node = [], 0
        while lay.kids[node]:
            node = lay.kids[node][0]
            chain.append(node)
        return [(1.0, chain)]
    out = []

    def walk(node, prob, chain):
        kids = lay.kids[node]
        if not kids:
            out.append((prob, chain))
        total = sum(lay.mult[c] for c in kids)
        for c in kids:
            walk(c, prob * lay.mult[c] / total, chain + [c])

    walk(0, 1.0, [])
    return out


def block_efficiency(tree: Tree, p: torch.Tensor, name: str) -> float:
    """E[tau + 1 | tree] of verifier `name` (or an alias) on this tree with target rows p [N, V]."""
    name = canonical(name)
    if name == "greedy":
        lay, best, node, tau = layout(tree), p.argmax(-1).tolist(), 0, 0
        while (node := next((c for c in lay.kids[node] if lay.tokens[c] == best[node]), -1)) >= 0:
            tau += 1
        return 1.0 + tau
    if name == "traversal":
        return 1.0 + traversal.expected_accepted(tree, p)
    if name in ("naive", "bv"):
        out = 0.0
        for prob, chain in _chains(tree):
            if not chain:
                continue
            nodes, tokens = [0] + chain, tree.tokens[chain]
            if name == "bv":
                out += prob * bv.expected_accepted(p, tree.q, nodes, tokens)
            else:
                ratio = p[nodes[:-1], tokens].double() / tree.q[nodes[:-1], tokens].double()
                out += prob * float(ratio.clamp(max=1.0).cumprod(0).sum())
        return 1.0 + out
    if name not in OT_BASED:
        raise ValueError(f"no block-efficiency formula for verifier {name!r}")
    lay = layout(tree, distinct=True)
    reach = [0.0] * tree.size
    reach[0] = 1.0
    ordered = tree.sampling == "without_replacement"
    for node in range(tree.size):  # topological order: parents first (Eq. 3 products)
        kids = lay.kids[node]
        if not kids or reach[node] == 0.0:
            continue
        counts = {lay.tokens[c]: lay.mult[c] for c in kids}
        order = [lay.tokens[c] for c in kids] if ordered else None
        q_row = tree.q[node] if tree.q is not None else p[node]
        b = branching(name, p[node], q_row, counts, order)
        for c in kids:
            reach[c] = reach[node] * b[lay.tokens[c]]
    return 1.0 + sum(reach[1:])


def expected_block_efficiency(
    sample_tree: Callable[[], tuple[Tree, torch.Tensor]], name: str, s: int = 4
) -> float:
    """Eq. 1: E_T[E[tau + 1 | T]] estimated by the mean over s sampled trees (the paper uses
    s = 4); sample_tree() returns a fresh (tree, p). Unbiased; removes verification variance."""
    return sum(block_efficiency(*sample_tree(), name) for _ in range(s)) / s
