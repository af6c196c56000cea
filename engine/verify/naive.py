"""Naive speculative sampling on a single path (Leviathan et al. 2023; Chen et al. 2023); the
delayed-tree paper's "Naive" (Sec. 3.1, Appendix B.2).

Each drafted token a_i of the path is accepted with probability min(1, p(a_i)/q(a_i)); the
walk stops at the first rejection and emits a correction from norm((p - q)_+), or a bonus from p
after the last node. It verifies one path: on a multi-path tree it uses one rollout, a uniformly
chosen one for i.i.d. trees (child in proportion to multiplicity at each level) and the first
draws for trees drawn without replacement, which is a draft-sampled path either way.
Acceptance of one step: Algorithm 7 with k = 1.
"""

from __future__ import annotations

import torch

from engine.tree import Tree
from engine.verify.common import Accept, positive_part, single_path

# tree samplings verified losslessly (engine/tree.py); read by engine/methods.py
MODES = ("iid", "without_replacement")


def verify(tree: Tree, p: torch.Tensor, gen: torch.Generator) -> Accept:
    """p: [N, V] target distribution after each node."""

    def rule(chain, us):
        nodes = [0] + chain[:-1]  # the parent of each chain node
        tokens = tree.tokens[chain]  # [L]
        ratio = (p[nodes, tokens].double() / tree.q[nodes, tokens].double()).tolist()  # [L]
        for i, r in enumerate(ratio):
            if next(us) >= r:  # rejected (r >= 1 always accepts)
                return i, positive_part(p[nodes[i]] - tree.q[nodes[i]])
        return len(chain), None

    return single_path(tree, p, gen, "naive", MODES, rule)
