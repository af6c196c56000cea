"""TV: tree verification on a single path, the Accelerated Speculative Sampling (ASpS) of Hu &
Huang (ICML 2024, "Accelerated speculative sampling based on tree Monte Carlo"); delayed-tree
paper Table 1 and Sec. 3.1 ("provably improves upon naive speculative sampling ... to increase
E[tau]").

Naive speculative sampling couples p and q one token at a time. ASpS couples them on the tree
of continuations (Tree Monte Carlo): given the draft path a_1..a_L ~ q, with target rows
P_i = p(.|a_{1:i}) and draft rows Q_i, it builds the "neighbour distribution" P_N over the
outputs (stop after a_{1:i}, emit t), i = 0..L, and draws one output from it. The algorithm
walks the path keeping w, the probability of still being on it (P_N_ss, w_0 = 1); at node i:

    C1 = (Q_i - w P_i)_+                          the draft mass the target does not use
    C2 = C1(a_{i+1}) / sum(C1)                    the share of it drafted through a_{i+1}
    earlier stops, and the new row (w P_i - Q_i)_+ of stops after a_{1:i},
                        are scaled by C2 / Q_i(a_{i+1})
    w <- min(1, w P_i(a_{i+1}) / Q_i(a_{i+1}))    the entry that continues the path
and after the last node the row w P_L (bonus). Unlike naive (w_i = prod_j min(1, P/Q)), w is
the capped running product min(1, w P/Q), which recovers after a low ratio when later ratios
exceed one, like block verification's weights (Sun et al. 2024c), so more tokens are accepted
on average; the mass lost to the path is spread over
the earlier stops in proportion, which keeps the output law exactly p: integrated over a_{i+1}
~ Q_i, the scale C2 / Q_i(a_{i+1}) averages to one.

Closed form of the scales: sum(C1) = R_i + 1 - w_i with R_i = sum (w_i P_i - Q_i)_+, and
C1(a_{i+1}) / Q_i(a_{i+1}) = 1 - w_{i+1}, so the probability of stopping after a_{1:i} is
    s_i = R_i c_i prod_{j > i} c_j,    c_j = (1 - w_{j+1}) / (R_j + 1 - w_j)
(products over j < L), and w_L of taking the whole path. On a multi-path tree TV verifies one
rollout, chosen as in engine/verify/naive.py.

The same law as block verification: expanding the products, s_i = R_i prod_(j>i) (1 - w_j) /
prod_(j>=i) (R_j + 1 - w_j), which is block verification's h_i prod_(j>i) (1 - h_j)
(engine/verify/bv.py), and both draw the correction from (w_i P_i - Q_i)_+. So on every path
TV, as written here, outputs exactly what BV outputs in law (test_verify_khisti_tv.py checks
it); they differ only in the draws (one uniform over the stop law here, one per node from the
deepest there), and a difference between `tv` and `bv` trials is sampling noise. Hu & Huang's
paper is not among the five here: this reading of ASpS is not checked against its text.
"""

from __future__ import annotations

import torch

from engine.tree import Tree
from engine.verify.common import Accept, capped_weights, sample_index, single_path

# tree samplings verified losslessly (engine/tree.py); read by engine/methods.py
MODES = ("iid", "without_replacement")


def neighbour(
    p: torch.Tensor, q: torch.Tensor, nodes: list[int], tokens: torch.Tensor
) -> tuple[list[float], torch.Tensor]:
    """The neighbour distribution of the path root = nodes[0] -> ... -> nodes[L] with tokens
    [L]: stop probabilities s_0..s_L (s_L = w_L, the whole path) and the unnormalised stop
    rows (w_i P_i - Q_i)_+ [L, V] (float64) of the correction token."""
    w, res, mass = capped_weights(p, q, nodes, tokens)  # w [L + 1], res [L, V], R_i [L]
    L = len(mass)
    scale = [
        (1 - w[i + 1]) / (mass[i] + 1 - w[i]) if mass[i] + 1 - w[i] > 0 else 0.0 for i in range(L)
    ]
    stop, later = [0.0] * (L + 1), 1.0  # later: prod_{j > i} c_j
    for i in range(L - 1, -1, -1):
        stop[i] = mass[i] * scale[i] * later
        later *= scale[i]
    stop[L] = w[L]
    return stop, res


def verify(tree: Tree, p: torch.Tensor, gen: torch.Generator) -> Accept:
    """p: [N, V] target distribution after each node."""

    def rule(chain, us):
        stop, res = neighbour(p, tree.q, [0] + chain, tree.tokens[chain])
        tau = sample_index(torch.tensor(stop, dtype=torch.float64), next(us))  # (gen_len)
        return tau, None if tau == len(chain) else res[tau]

    return single_path(tree, p, gen, "tv", MODES, rule)


def expected_accepted(
    p: torch.Tensor, q: torch.Tensor, nodes: list[int], tokens: torch.Tensor
) -> float:
    """E[tau] for one path: sum_i i s_i."""
    stop, _ = neighbour(p, q, nodes, tokens)
    return sum(i * s for i, s in enumerate(stop))
