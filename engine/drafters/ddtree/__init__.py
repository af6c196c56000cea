"""DDTree (the DDTree paper): its host builder (build.py, Algorithm 1 over a block drafter's
per-position marginals), its device plan (plan.py), and its learned part, the trained
block-diffusion drafter (block.py, fed with the target's features by block_context.py)."""

from __future__ import annotations

from engine.drafters.ddtree import build, plan
from engine.drafters.ddtree.block_context import attach
from engine.drafters.record import Drafter

DRAFTER = Drafter(
    name="ddtree",
    config=build.DDTreeConfig,
    build=build.build,
    sampling=build.SAMPLING,
    default_verifier="nss",
    nodes=lambda c: c.B,
    budget="B",
    figures=("acceptance_lengths",),  # Sec. 5.4, Fig. 4
    plan=plan.plan,
    grow=plan.grow,
    attach=attach,
)
