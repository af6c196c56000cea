"""Traversal Verification (Weng et al. 2025): bottom-up, sequence-level verification of a draft
tree; delayed-tree paper Sec. 3.2. For a single path it is block verification (engine/verify/bv.py).

Every node u carries a weight w_u (the capped sequence-level ratio, "p_alpha" in Weng et al.):
w_root = 1 and a child x of u gets w_x = min(1, w_u P_u(x) / Q_u(x)) when it is visited. The
tree is traversed in post-order (deepest-first DFS): a leaf is accepted with probability equal to
its weight, which accepts the whole path to it. When a child x of u is rejected (it and its
whole subtree), u is updated as in a block-verification rejection:
    P_u <- norm((w_u P_u - Q_u)_+),   w_u <- R / S,
    R = sum (w_u P_u - Q_u)_+,  S = sum (Q_u - w_u P_u)_+,
and Q_u loses x (renormalised): the next sibling is a draw distinct from the ones already
tried. When every child of u is rejected, u is a leaf and is accepted with probability w_u; the
next token is then drawn from the current (residual) P_u. The root keeps w = 1, so it is always
accepted in the end.

Why it is lossless (our proof, by induction over the children of a node): if u enters with
weight w and target P, the walk accepts inside u's subtree with probability w, and conditioned on
that the emitted continuation has the target's law with first token ~ P. A child x drawn with
law Q_j is accepted-inside with probability min(Q_j(x), w P(x)) per token x, rejected with
probability S, and after a rejection the updated (w', P') covers the rest: S w' P' = (w P - Q_j)_+,
so the first token is w P-distributed in total and the rejection probability is S - R = 1 - w.
The argument only needs each child's token to have the stated law given the siblings already
tried, so it holds for
- trees drawn without replacement: children in draw order, Q_j = q without the earlier ones;
- merged i.i.d. trees: the distinct children in the order of their first appearance in a uniform
  shuffle of the draws, which has exactly that law; multiplicities only change the order and the
  subtrees (more rollouts below a child), not the updates.
`expected_accepted` computes E[tau | tree] with the same recursion (no Monte Carlo).
"""

from __future__ import annotations

import itertools

import torch

from engine.tree import Tree
from engine.verify.common import (
    Accept,
    Layout,
    first_appearance_order,
    layout,
    positive_part,
    require,
    sample_index,
    uniforms,
)

# tree samplings verified losslessly (engine/tree.py); read by engine/methods.py
MODES = ("iid", "without_replacement")


def reject_update(w: float, P: torch.Tensor, Q: torch.Tensor) -> tuple[float, torch.Tensor]:
    """After a child drawn from Q is rejected: (R / S, norm((w P - Q)_+)). [V] float64."""
    diff = w * P - Q  # [V]
    res = positive_part(diff)
    R, S = torch.stack([res.sum(), positive_part(-diff).sum()]).tolist()
    if S <= 0 or R <= 0:  # a rejection of probability 0, or a node that can no longer accept
        return (1.0 if S <= 0 else 0.0), P
    return min(1.0, R / S), res / R


def _weight(w: float, P: torch.Tensor, Q: torch.Tensor, token: int) -> float:
    px, qx = torch.stack([P[token], Q[token]]).tolist()
    return min(1.0, w * px / qx) if qx > 0 else 0.0


def _without(Q: torch.Tensor, token: int) -> torch.Tensor:
    Q = Q.clone()
    Q[token] = 0.0
    mass = Q.sum()
    return Q / mass if float(mass) > 0 else Q


def verify(tree: Tree, p: torch.Tensor, gen: torch.Generator) -> Accept:
    """p: [N, V] target distribution after each node; tree drawn i.i.d. or without
    replacement from tree.q."""
    require(tree, MODES, "traversal")
    lay = layout(tree, distinct=True)
    iid = tree.sampling == "iid"
    us = uniforms(gen, p.device)

    def visit(node: int, w: float, path: list[int]):
        """Post-order visit of node's subtree: (accepted path, its next-token law) or None."""
        P = p[node].double()
        if lay.kids[node]:
            Q = tree.q[node].double()
            order = first_appearance_order(lay, node, us) if iid else lay.kids[node]
            for child in order:
                x = lay.tokens[child]
                found = visit(child, _weight(w, P, Q, x), path + [child])
                if found is not None:
                    return found
                w, P = reject_update(w, P, Q)
                Q = _without(Q, x)
        if node == 0 or next(us) < w:
            return path, P
        return None

    path, law = visit(0, 1.0, [])
    return Accept(path=path, token=sample_index(law, next(us)))


def _expected(
    p: torch.Tensor,
    q: torch.Tensor,
    lay: Layout,
    node: int,
    depth: int,
    w: float,
    P: torch.Tensor,
    iid: bool,
) -> tuple[float, float]:
    """Given the tree: (P(accept inside node's subtree), E[accepted depth * 1{accepted inside}])
    for entry weight w. (Averaged over the subtree's draws the first is w; given them it is not.)"""
    kids = lay.kids[node]
    if not kids:
        return w, w * depth
    orders = [(1.0, tuple(kids))]
    if iid:  # average over first-appearance orders, weighted as successive sampling
        orders = []
        for order in itertools.permutations(kids):
            prob, left = 1.0, sum(lay.mult[c] for c in kids)
            for c in order:
                prob *= lay.mult[c] / left
                left -= lay.mult[c]
            orders.append((prob, order))
    accept, depth_sum = 0.0, 0.0
    for prob, order in orders:
        wu, Pu, Q, reach, a, d = w, P, q[node].double(), 1.0, 0.0, 0.0
        for c in order:
            x = lay.tokens[c]
            ac, dc = _expected(p, q, lay, c, depth + 1, _weight(wu, Pu, Q, x), p[c].double(), iid)
            a, d, reach = a + reach * ac, d + reach * dc, reach * (1 - ac)
            wu, Pu = reject_update(wu, Pu, Q)
            Q = _without(Q, x)
        accept += prob * (a + reach * wu)
        depth_sum += prob * (d + reach * wu * depth)
    return accept, depth_sum


def expected_accepted(tree: Tree, p: torch.Tensor) -> float:
    """E[tau | tree]: the mean number of accepted draft tokens of Traversal Verification."""
    lay = layout(tree, distinct=True)
    return _expected(p, tree.q, lay, 0, 0, 1.0, p[0].double(), tree.sampling == "iid")[1]
