"""SpecInfer: multi-round rejection sampling (Miao et al. 2024, Sec. 4.2) used top-down;
delayed-tree paper Appendix B.4, Algorithm 4.

At a node with draws X_1..X_k the solver tries them one at a time: draw i is accepted with
probability min(1, p_i(X_i)/q_i(X_i)); after a rejection the target becomes
p_{i+1} = norm((p_i - q_i)_+); when every draw is rejected the output is sampled from p_k.
- i.i.d. trees (Algorithm 4): the draws are tried in uniformly random order (x ~ U(S) and
  removal) and q_i = q for every round, so p_1..p_k do not depend on the draws.
- trees drawn without replacement (the SpecInfer / DySpec / Sequoia variant): the draws are
  tried in draw order and q_i is q with X_1..X_{i-1} removed and renormalised
  (`without_replacement_residual`), the law of the i-th draw given the earlier ones.
Either way round i's candidate is q_i-distributed given the past, so every round is a naive
speculative step against the current residual and the output follows p. Acceptance:
Algorithm 9; branching: Algorithm 14 (i.i.d.).
"""

from __future__ import annotations

import torch

from engine.sampling import residual
from engine.tree import Tree
from engine.verify.common import Accept, layout, require, sample_index, shuffled_draws, top_down

# tree samplings verified losslessly (engine/tree.py); read by engine/methods.py
MODES = ("iid", "without_replacement")


def round_drafts(q: torch.Tensor, tokens: torch.Tensor, iid: bool) -> torch.Tensor:
    """q_i for each round: [V], [k] -> [k, V]. i.i.d.: q every round; without replacement: q
    with the earlier draws removed, renormalised."""
    k = tokens.shape[0]
    if iid:
        return q.double().expand(k, -1)
    drawn = torch.zeros(k, q.shape[0], dtype=torch.float64, device=q.device)
    drawn[torch.arange(k, device=q.device), tokens] = 1.0
    earlier = drawn.cumsum(0) - drawn  # [k, V]: 1 where drawn before round i
    rows = q.double() * (1 - earlier.clamp(max=1.0))
    return rows / rows.sum(-1, keepdim=True).clamp(min=1e-300)


def round_targets(p: torch.Tensor, qs: torch.Tensor) -> torch.Tensor:
    """p_0 = p, p_{i+1} = norm((p_i - q_i)_+): [V], [k, V] -> [k + 1, V]."""
    rows = [p.double()]
    for i in range(qs.shape[0]):
        rows.append(residual(rows[-1], qs[i]))
    return torch.stack(rows)


def verify(tree: Tree, p: torch.Tensor, gen: torch.Generator) -> Accept:
    """p: [N, V] target distribution after each node; tree drawn i.i.d. or without replacement
    from tree.q."""
    require(tree, MODES, "specinfer")
    lay = layout(tree, distinct=True)
    iid = tree.sampling == "iid"

    def solve(node, us):
        draws = shuffled_draws(lay, node, us) if iid else lay.kids[node]
        x = tree.tokens[draws]  # [k]
        qs = round_drafts(tree.q[node], x, iid)  # [k, V]
        ps = round_targets(p[node], qs)  # [k + 1, V]
        rounds = torch.arange(len(draws), device=p.device)
        accept = (ps[rounds, x] / qs[rounds, x]).tolist()  # [k] p_i(X_i) / q_i(X_i)
        for c, a in zip(draws, accept):
            if next(us) < a:
                return lay.tokens[c]
        return sample_index(ps[-1], next(us))

    return top_down(tree, p, lay, gen, solve)
