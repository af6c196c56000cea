"""Sequoia (Chen et al. 2024): its host builder (build.py, the dynamic program's tree), its
device plan (plan.py) and the measurement of its acceptance profile (profile.py)."""

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
    children=lambda c: ("width" if c.profile == build.MEASURED else "profile", c.ranks),
    budget="budget",
    plan=plan.plan,
    grow=plan.grow,
    measured_first=build.measured_first,
    standalone=(("profile", build.FIXED),),
)
