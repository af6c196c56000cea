"""Block verification on a single path (Sun et al. 2024c, "Block verification accelerates
speculative decoding", Alg. 2); delayed-tree paper Sec. 3.1.

For a draft path a_1..a_L ~ q with target rows P_i = p(.|a_{1:i}) and draft rows Q_i, define the
node weights w_0 = 1, w_i = min(1, w_{i-1} P_{i-1}(a_i) / Q_{i-1}(a_i)) and the w-weighted
residuals res_i = (w_i P_i - Q_i)_+ with mass R_i. Node i is accepted independently with
    h_L = w_L,   h_i = R_i / (R_i + 1 - w_i)  (i < L),   h_0 = 1,
the output is the deepest accepted node tau, and the next token is drawn from P_L when
tau = L and from norm(res_tau) otherwise. This is the single-path case of Traversal Verification
(engine/verify/traversal.py), which reduces to it for K = 1; its block efficiency is optimal
among single-path verifiers (Sun et al. 2024c, Thm. 2). On a multi-path tree BV verifies one
rollout, chosen as in engine/verify/naive.py.
"""

from __future__ import annotations

import torch

from engine.tree import Tree
from engine.verify.common import Accept, capped_weights, single_path

# tree samplings verified losslessly (engine/tree.py); read by engine/methods.py
MODES = ("iid", "without_replacement")


def chain_terms(
    p: torch.Tensor, q: torch.Tensor, nodes: list[int], tokens: torch.Tensor
) -> tuple[list[float], list[float], torch.Tensor]:
    """Weights w_0..w_L, acceptance probabilities h_0..h_L and residuals res_0..res_{L-1}
    [L, V] (float64) of the path root = nodes[0] -> ... -> nodes[L] with tokens [L]."""
    w, res, mass = capped_weights(p, q, nodes, tokens)  # w [L + 1], res [L, V], mass [L]
    h = [m / (m + 1 - wi) if m + 1 - wi > 0 else 1.0 for m, wi in zip(mass, w[:-1])]
    h[0] = 1.0  # the root is always accepted
    return w, h + [w[-1]], res


def verify(tree: Tree, p: torch.Tensor, gen: torch.Generator) -> Accept:
    """p: [N, V] target distribution after each node."""

    def rule(chain, us):
        _, h, res = chain_terms(p, tree.q, [0] + chain, tree.tokens[chain])
        for i in range(len(chain), 0, -1):  # the deepest accepted node
            if next(us) < h[i]:
                return i, None if i == len(chain) else res[i]
        return 0, res[0]

    return single_path(tree, p, gen, "bv", MODES, rule)


def expected_accepted(
    p: torch.Tensor, q: torch.Tensor, nodes: list[int], tokens: torch.Tensor
) -> float:
    """E[tau] for one path: sum_i i * h_i * prod_{j > i} (1 - h_j)."""
    _, h, _ = chain_terms(p, q, nodes, tokens)
    out, none_deeper = 0.0, 1.0
    for i in range(len(h) - 1, 0, -1):
        out += i * h[i] * none_deeper
        none_deeper *= 1 - h[i]
    return out
