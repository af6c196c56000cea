"""Delayed tree expansion (the delayed-tree paper, Sec. 5): its host builder (build.py) and its
learned part, the NDE selector (Sec. 6: the network in selector.py, fed at each root by the
taps of taps.py)."""

from __future__ import annotations

from engine.drafters.delayed import build
from engine.drafters.delayed.taps import attach
from engine.drafters.record import Drafter

DRAFTER = Drafter(
    name="delayed",
    config=build.DelayedConfig,
    build=build.build,
    sampling=build.SAMPLING,
    # the delayed-tree paper's best OT-based verifier with delayed expansion
    default_verifier="specinfer",
    nodes=lambda c: c.L1 + c.K * c.L2,
    children=lambda c: ("K", c.K),
    # greedy, the trunk and the K coinciding branches are one chain (as the i.i.d. tree's);
    # the NDE selector picks the shape per root, so no fixed chain
    chain=lambda c: c.L1 + c.L2 if c.selector == "fixed" else 0,
    attach=attach,
)
