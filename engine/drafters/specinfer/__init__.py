"""SpecInfer's expansion tree (Miao et al. 2024, Sec. 3.1): its host builder (build.py) and its
device plan (plan.py)."""

from __future__ import annotations

from engine.drafters.record import Drafter
from engine.drafters.specinfer import build, plan


def _nodes(widths: tuple[int, ...]) -> int:
    total, level = 0, 1
    for w in widths:
        level *= w
        total += level
    return total


DRAFTER = Drafter(
    name="specinfer",
    config=build.SpecInferConfig,
    build=build.build,
    sampling=build.SAMPLING,
    default_verifier="specinfer",
    nodes=lambda c: _nodes(c.widths),
    children=lambda c: ("expansion" if c.expansion else "k", max(c.widths)),
    budget="expansion",  # its widths <k_1, .., k_m> fix the node count (`nodes`)
    plan=plan.plan,
    grow=plan.grow,
)
