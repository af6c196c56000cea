"""NaiveTree: the naive OTLP solver used top-down on a multi-path tree (delayed-tree paper,
Sec. 3.2 and Appendix B.2, Algorithm 2; Leviathan et al. 2023).

At a node with draws X_1..X_k ~ q the solver accepts X_1 with probability min(1, p(X_1)/q(X_1))
and otherwise samples Y ~ norm((p - q)_+); the walk moves into the child holding the output token
(X_1 or, after a rejection, any other child holding Y) and stops with Y as the correction
otherwise. X_1 is one uniformly chosen draw (a child in proportion to its multiplicity) for
i.i.d. trees and the first draw for trees drawn without replacement; both are q-distributed, so
the output token follows p. Acceptance: Algorithm 7; branching: Algorithm 12.
"""

from __future__ import annotations

import torch

from engine.tree import Tree
from engine.verify.common import (
    Accept,
    layout,
    pick_child,
    positive_part,
    require,
    sample_index,
    top_down,
)

# tree samplings verified losslessly (engine/tree.py); read by engine/methods.py
MODES = ("iid", "without_replacement")


def verify(tree: Tree, p: torch.Tensor, gen: torch.Generator) -> Accept:
    """p: [N, V] target distribution after each node."""
    require(tree, MODES, "naive_tree")
    lay = layout(tree, distinct=True)
    q = tree.q
    iid = tree.sampling == "iid"

    def solve(node, us):
        first = pick_child(lay, node, next(us)) if iid else lay.kids[node][0]
        x = lay.tokens[first]
        pq = torch.stack([p[node, x], q[node, x]]).double().tolist()  # p(X_1), q(X_1)
        if next(us) * pq[1] < pq[0]:  # U < p(X_1) / q(X_1)
            return x
        return sample_index(positive_part(p[node] - q[node]), next(us))

    return top_down(tree, p, lay, gen, solve)
