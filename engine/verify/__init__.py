"""Verifiers: name -> `Verifier` record: `verify(tree, p, gen) -> Accept` (DESIGN.md,
"Verifier") and the tree samplings it verifies losslessly, declared by its module (`MODES`).

greedy: temperature 0 only. Stochastic (lossless for the tree samplings they accept, a clear
ValueError otherwise), names as in the delayed-tree paper (Table 1, Appendix B):
    nss         any tree (also deterministic top-k trees)           Alg. 1
    naive       one draft-sampled path of the tree                  Alg. 2 with k = 1
    naive_tree  i.i.d. / without-replacement trees, top-down        Alg. 2
    spectr      i.i.d. trees, K-SEQ with rho*                       Alg. 3
    specinfer   i.i.d. / without-replacement trees                  Alg. 4
    khisti      i.i.d. trees, truncated-LP importance sampling      Alg. 5 (Khisti et al. Sec. 4)
    khisti_tournament  i.i.d. trees, Alg. 5 with our exact tournament (a variant, not the paper's)
    tv          one draft-sampled path, tree verification (ASpS)    Sec. 3.1 (Hu & Huang 2024)
    bv          one draft-sampled path, block verification          Sec. 3.1
    traversal   i.i.d. / without-replacement trees, bottom-up       Sec. 3.2
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from engine.tree import Tree
from engine.verify import (
    bv,
    greedy,
    khisti,
    khisti_tournament,
    naive,
    naive_tree,
    nss,
    specinfer,
    spectr,
    traversal,
    tv,
)
from engine.verify.common import Accept


@dataclass(frozen=True)
class Verifier:
    verify: Callable[[Tree, torch.Tensor, torch.Generator | None], Accept]
    modes: tuple[str, ...]  # tree samplings it verifies losslessly (the module's MODES)
    temperature_zero_only: bool = False  # exact only for one-hot target rows

    def accepts(self, sampling: str | None, temperature: float) -> bool:
        """Whether trees drawn as `sampling` at `temperature` are verified losslessly
        (sampling None: root-only trees, which every mode's check lets through)."""
        if self.temperature_zero_only and temperature != 0:
            return False
        return sampling is None or sampling in self.modes


VERIFIERS: dict[str, Verifier] = {
    "greedy": Verifier(greedy.verify, greedy.MODES, temperature_zero_only=True),
    "nss": Verifier(nss.verify, nss.MODES),
    "naive": Verifier(naive.verify, naive.MODES),
    "naive_tree": Verifier(naive_tree.verify, naive_tree.MODES),
    "spectr": Verifier(spectr.verify, spectr.MODES),
    "specinfer": Verifier(specinfer.verify, specinfer.MODES),
    "khisti": Verifier(khisti.verify, khisti.MODES),
    "khisti_tournament": Verifier(khisti_tournament.verify, khisti_tournament.MODES),
    "tv": Verifier(tv.verify, tv.MODES),
    "bv": Verifier(bv.verify, bv.MODES),
    "traversal": Verifier(traversal.verify, traversal.MODES),
}

__all__ = ["Accept", "VERIFIERS", "Verifier"]
