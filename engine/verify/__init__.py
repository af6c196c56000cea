"""Verifiers: name -> `verify(tree, p, gen) -> Accept` (DESIGN.md, "Verifier").

greedy: temperature 0 only. Stochastic (lossless for the tree samplings they accept, a clear
ValueError otherwise), names as in the delayed-tree paper (Table 1, Appendix B):
    nss         any tree (also deterministic top-k trees)           Alg. 1
    naive       one draft-sampled path of the tree                  Alg. 2 with k = 1
    naive_tree  i.i.d. / without-replacement trees, top-down        Alg. 2
    spectr      i.i.d. trees, K-SEQ with rho*                       Alg. 3
    specinfer   i.i.d. / without-replacement trees                  Alg. 4
    khisti      i.i.d. trees, importance sampling + tournament      Alg. 5
    bv          one draft-sampled path, block verification          Sec. 3.1
    traversal   i.i.d. / without-replacement trees, bottom-up       Sec. 3.2
"""

from engine.verify import bv, greedy, khisti, naive, naive_tree, nss, spectr, specinfer, traversal
from engine.verify.common import Accept

VERIFIERS = {
    "greedy": greedy.verify,
    "nss": nss.verify,
    "naive": naive.verify,
    "naive_tree": naive_tree.verify,
    "spectr": spectr.verify,
    "specinfer": specinfer.verify,
    "khisti": khisti.verify,
    "bv": bv.verify,
    "traversal": traversal.verify,
}

__all__ = ["Accept", "VERIFIERS"]
