"""Tree builders: method name -> `Drafter` record (DESIGN.md, "Drafter").

`build(draft: TreeBuilder, state: DecodeState, cfg, gen: torch.Generator) -> Tree`; configs
are frozen dataclasses with the papers' parameter names and defaults. Adding a method: one
module with its config, `SAMPLING` and `build`, and one entry below.

Every drafter draws from and scores with the draft's warp, `state.draft_warp` (the rows
`TreeBuilder.expand` returns come from it too), never the target's `state.warp`: "temperature"
in the drafters' docstrings is the draft's, which a trial may set apart from the target's
(engine/sampling.py draft_warp). The tree's sampling mode follows the draft's temperature.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from engine.draft import DecodeState, TreeBuilder
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
from engine.tree import Tree, TreeSampling


@dataclass(frozen=True)
class Drafter:
    config: type  # frozen dataclass of the method's parameters (the paper's names)
    build: Callable[[TreeBuilder, DecodeState, Any, torch.Generator], Tree]
    # how the trees' siblings are drawn; None: root-only trees, which every verifier accepts
    sampling: TreeSampling | None
    default_verifier: str  # at temperature > 0; temperature 0 uses "greedy"


DRAFTERS: dict[str, Drafter] = {
    "autoregressive": Drafter(
        autoregressive.AutoregressiveConfig, autoregressive.build, None, "naive"
    ),
    "linear": Drafter(linear.LinearConfig, linear.build, linear.SAMPLING, "naive"),
    # top-k children are deterministic: NSS is the lossless verifier at T > 0
    "fixed_tree": Drafter(fixed_tree.FixedTreeConfig, fixed_tree.build, fixed_tree.SAMPLING, "nss"),
    # best on i.i.d. trees in the delayed-tree paper (Table 2)
    "iid": Drafter(iid.IIDConfig, iid.build, iid.SAMPLING, "traversal"),
    # the delayed-tree paper's best OT-based verifier with delayed expansion
    "delayed": Drafter(delayed.DelayedConfig, delayed.build, delayed.SAMPLING, "specinfer"),
    "dynatree": Drafter(dynatree.DynaTreeConfig, dynatree.build, dynatree.SAMPLING, "nss"),
    "dyspec": Drafter(dyspec.DySpecConfig, dyspec.build, dyspec.SAMPLING, "specinfer"),
    "salf": Drafter(salf.SALFConfig, salf.build, salf.SAMPLING, "nss"),
    "beam": Drafter(beam.BeamConfig, beam.build, beam.SAMPLING, "nss"),
    "ddtree": Drafter(ddtree.DDTreeConfig, ddtree.build, ddtree.SAMPLING, "nss"),
    "specinfer": Drafter(
        specinfer.SpecInferConfig, specinfer.build, specinfer.SAMPLING, "specinfer"
    ),
    "sequoia": Drafter(sequoia.SequoiaConfig, sequoia.build, sequoia.SAMPLING, "specinfer"),
    # prompt lookup: no draft forward; deterministic given the context, so NSS at T > 0
    "lookup": Drafter(
        prompt_lookup.LookupConfig, prompt_lookup.build, prompt_lookup.SAMPLING, "nss"
    ),
    "lookup_tree": Drafter(
        prompt_lookup.LookupTreeConfig, prompt_lookup.build, prompt_lookup.SAMPLING, "nss"
    ),
    "lookup_hybrid": Drafter(
        lookup_hybrid.LookupHybridConfig, lookup_hybrid.build, lookup_hybrid.SAMPLING, "nss"
    ),
}

# methods that never run the draft model: they run with a pair whose draft is None
# (engine/no_draft.py; `draft: none` in a sweep, `--draft none` on the command line)
MODEL_FREE = frozenset({"autoregressive", "lookup", "lookup_tree"})
