"""The fixed tree (DynaTree's Table 1 baseline): its host builder (build.py) and its device
plan (plan.py)."""

from __future__ import annotations

from engine.drafters.fixed_tree import build, plan
from engine.drafters.record import Drafter, full_tree

DRAFTER = Drafter(
    name="fixed_tree",
    config=build.FixedTreeConfig,
    build=build.build,
    sampling=build.SAMPLING,
    default_verifier="nss",  # top-k children are deterministic: NSS is lossless at T > 0
    nodes=lambda c: min(c.budget, full_tree(c.branch, c.depth, c.budget)),
    children=lambda c: ("branch", c.branch),
    budget="budget",
    plan=plan.plan,
    grow=plan.grow,
)
