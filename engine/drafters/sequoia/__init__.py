"""Sequoia (Chen et al. 2024): its host builder (build.py, the dynamic program's tree) and its
device plan (plan.py)."""

from __future__ import annotations

from engine.drafters.record import Drafter
from engine.drafters.sequoia import build, plan

DRAFTER = Drafter(
    name="sequoia",
    config=build.SequoiaConfig,
    build=build.build,
    sampling=build.SAMPLING,
    default_verifier="specinfer",
    nodes=lambda c: c.budget,
    children=lambda c: ("profile", len(c.profile)),
    budget="budget",
    plan=plan.plan,
    grow=plan.grow,
)
