"""EAGLE-2's beam-search tree (SALF paper App. B): its host builder (build.py) and its device plan
(plan.py)."""

from __future__ import annotations

from engine.drafters.beam import build, plan
from engine.drafters.record import Drafter

DRAFTER = Drafter(
    name="beam",
    config=build.BeamConfig,
    build=build.build,
    sampling=build.SAMPLING,
    default_verifier="nss",
    nodes=lambda c: c.N,
    children=lambda c: ("top_k", c.top_k),
    budget="N",
    plan=plan.plan,
    grow=plan.grow,
)
