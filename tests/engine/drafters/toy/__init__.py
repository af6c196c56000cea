"""A toy tree method with a device plan, added as docs/architecture.md's walk-through adds one:
its host builder (build.py), its device plan (plan.py) and its record (here). The library lists
its records in engine/drafters/__init__.py; tests/engine/drafters/test_toy_method.py registers
this one there for the length of a test."""

from __future__ import annotations

from engine.drafters.record import Drafter, full_tree
from tests.engine.drafters.toy import build, plan

DRAFTER = Drafter(
    name="toy",
    config=build.ToyConfig,
    build=build.build,
    sampling=build.SAMPLING,
    default_verifier="nss",
    nodes=lambda c: full_tree(c.k, c.depth, 10**6),
    children=lambda c: ("k", c.k),
    plan=plan.plan,
    grow=plan.grow,
)
