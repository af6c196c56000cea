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
    bv          one draft-sampled path, block verification          Sec. 3.1
    traversal   i.i.d. / without-replacement trees, bottom-up       Sec. 3.2

Aliases (`ALIASES`, resolved by `canonical`): a name that is another verifier's law.
    tv -> bv    Hu & Huang's tree verification, Accelerated Speculative Sampling (ASpS; ICML
                2024, "Accelerated Speculative Sampling Based on Tree Monte Carlo", PMLR 235,
                hu24f; delayed-tree paper Table 1 and Sec. 3.1). Its algorithm, read in the
                authors' public implementation (lib.py `tmc_sample`, whose README cites the
                paper; the paper's PDF text past its abstract was not reachable here), walks the
                draft path a_1..a_L ~ q keeping P_N, the unnormalised law over the outputs
                "accept a_1..a_i, emit t": with w the entry that continues the path (w = 1 at
                the root), at position i it sets C1 = (Q_i - w P_i)_+, scales every earlier
                entry by t1 = C1(a_i) / (sum(C1) Q_i(a_i)) (t1 = 1 where C1 = 0), writes the
                row t1 (w P_i - Q_i)_+ and the path entry min(1, w P_i(a_i) / Q_i(a_i)), and
                draws one entry of P_N (the bonus from P_L when it is the whole path). Since
                t1 = (1 - w_{i+1}) / (R_i + 1 - w_i) with R_i = sum (w_i P_i - Q_i)_+, the
                probability of stopping after i tokens is R_i / (R_i + 1 - w_i) *
                prod_{j > i} (1 - w_j) / (R_j + 1 - w_j) * ..., which is block verification's
                h_i prod_{j > i} (1 - h_j) (Sun et al. 2024c, Alg. 2; engine/verify/bv.py), and
                the correction is drawn from the same (w_i P_i - Q_i)_+: on every path ASpS
                outputs exactly BV's law (tests/engine/verify/test_verify_tv_alias.py runs the
                paper's steps, transcribed, against bv.py). The two differ only in how the
                randomness is drawn, so `tv` is `bv`: a sweep asking for `verifier: tv` gets
                bv's trial (engine/methods.py resolve_method maps it, so the hash is bv's), and
                trials stored with `tv` still load, report and verify (as bv).
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
    "bv": Verifier(bv.verify, bv.MODES),
    "traversal": Verifier(traversal.verify, traversal.MODES),
}

# name -> the verifier whose law it is (module docstring); not in VERIFIERS
ALIASES: dict[str, str] = {"tv": "bv"}


def canonical(name: str | None) -> str | None:
    """The registry name of a verifier name or alias (unknown names unchanged)."""
    return ALIASES.get(name, name) if name is not None else None


__all__ = ["ALIASES", "Accept", "VERIFIERS", "Verifier", "canonical"]
