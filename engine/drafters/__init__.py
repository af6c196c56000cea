"""The tree methods: method name -> its record (`Drafter`, engine/drafters/record.py).

Each method's home is one module here, or one package once it has a device plan or a learned
part (build.py: the paper's host builder; plan.py: its greedy tree grown on the device; its
learned part beside them); the home exports its record as `DRAFTER`, listed once below.
Adding a method: its home and one name in the list (docs/architecture.md, "Where to add").

Every drafter draws from and scores with the draft's warp, `state.draft_warp` (the rows
`TreeBuilder.expand` returns come from it too), never the target's `state.warp`: "temperature"
in the drafters' docstrings is the draft's, which a trial may set apart from the target's
(engine/sampling.py draft_warp). The tree's sampling mode follows the draft's temperature.
"""

from __future__ import annotations

from engine.drafters import (
    autoregressive,
    beam,
    ddtree,
    delayed,
    dynatree,
    dyspec,
    fixed_tree,
    iid,
    linear,
    lookup_hybrid,
    prompt_lookup,
    salf,
    sequoia,
    specinfer,
)
from engine.drafters.record import Drafter

DRAFTERS: dict[str, Drafter] = {
    d.name: d
    for d in (
        autoregressive.DRAFTER,
        linear.DRAFTER,
        fixed_tree.DRAFTER,
        iid.DRAFTER,
        delayed.DRAFTER,
        dynatree.DRAFTER,
        dyspec.DRAFTER,
        salf.DRAFTER,
        beam.DRAFTER,
        ddtree.DRAFTER,
        specinfer.DRAFTER,
        sequoia.DRAFTER,
        prompt_lookup.LOOKUP,
        prompt_lookup.LOOKUP_TREE,
        lookup_hybrid.DRAFTER,
    )
}

# the baseline every speedup is measured against: the target alone, one token per forward
AUTOREGRESSIVE = autoregressive.DRAFTER.name

# the small tree of each sampling mode, (method, params), which the distribution checks draw
# (engine/certify/distribution.py)
PROBE_TREES: dict[str, tuple[str, dict]] = {
    "iid": (iid.DRAFTER.name, {"K": 2, "L": 2}),
    "without_replacement": (dyspec.DRAFTER.name, {"budget": 4}),
    "deterministic": (fixed_tree.DRAFTER.name, {"depth": 2, "branch": 2}),
}

# methods that never run the draft model: they run with a pair whose draft is None
# (engine/draft/none.py; `draft: none` in a sweep, `--draft none` on the command line)
MODEL_FREE = frozenset(name for name, d in DRAFTERS.items() if d.model_free)
