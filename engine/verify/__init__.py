"""Verifiers: name -> `verify(tree, p, gen) -> Accept` (DESIGN.md, "Verifier")."""

from engine.verify import greedy
from engine.verify.common import Accept

VERIFIERS = {
    "greedy": greedy.verify,
}

__all__ = ["Accept", "VERIFIERS"]
