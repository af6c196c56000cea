"""DynaTree (Xiong et al.): its host builder (build.py, App. D Algorithm 1) and its device plan
(plan.py)."""

from __future__ import annotations

from engine.drafters.dynatree import build, plan
from engine.drafters.record import Drafter, full_tree

DRAFTER = Drafter(
    name="dynatree",
    config=build.DynaTreeConfig,
    build=build.build,
    sampling=build.SAMPLING,
    default_verifier="nss",
    # paper: the top-1 root u0, then up to D_max levels below it
    nodes=lambda c: min(c.N_max, (c.variant == "paper") + full_tree(c.B_max, c.D_max, c.N_max)),
    children=lambda c: ("B_max", c.B_max),
    budget="N_max",
    figures=("depth_branch",),  # Sec. 4.6, Fig. 4
    plan=plan.plan,
    grow=plan.grow,
)
