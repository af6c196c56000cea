"""NSS: "naive speculative sampling" of SpecInfer (Miao et al. 2024), called NSS in the
delayed-tree paper (Appendix B.1, Algorithm 1).

The OTLP solver ignores the draft: at every node it samples Y ~ p and the top-down walk
(Sec. 3.2) moves into the child holding Y, stopping with Y as the correction otherwise. Since the
emitted tokens are plain target samples it is lossless for any tree, including deterministic
(top-k, greedy) ones, and needs no draft distributions. Acceptance: Algorithm 6; branching:
Algorithm 11 (engine/verify/formulas.py).
"""

from __future__ import annotations

import torch

from engine.tree import SAMPLING_MODES, Tree
from engine.verify.common import Accept, layout, require, sample_index, top_down

# tree samplings verified losslessly (engine/tree.py); read by engine/methods.py
MODES = SAMPLING_MODES


def verify(tree: Tree, p: torch.Tensor, gen: torch.Generator) -> Accept:
    """p: [N, V] target distribution after each node."""
    require(tree, MODES, "nss", needs_q=False)
    lay = layout(tree)
    return top_down(tree, p, lay, gen, lambda node, us: sample_index(p[node], next(us)))
