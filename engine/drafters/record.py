"""A tree method's record (`Drafter`): everything other code asks about a method, in one place.

Each method's home (engine/drafters/<name>.py, or the package engine/drafters/<name>/ once it
has a device plan or a learned part) exports one record as `DRAFTER`; engine/drafters/__init__
lists them once. Sweeps, the CLI, the caps, the iteration paths, the decoding loop, the
reports and the benchmarks read a method through its record only.

    build(draft: TreeBuilder, state: DecodeState, cfg, gen: torch.Generator) -> Tree

grows one draft tree through the TreeBuilder (engine/draft/builder.py), drawing from and
scoring with the draft's warp `state.draft_warp`; `config` is a frozen dataclass with the
paper's parameter names and defaults. The optional parts:

- `chain(cfg)`: the length of the one chain its greedy tree always is (0: not a chain); the
  fast path then runs engine/iteration/chain.py.
- `plan(cfg, state) -> Plan | None` and `grow(lm, scalars, top_p, top_t, **settings)`: its
  greedy tree grown on the device with static shapes (engine/draft/growth.py,
  engine/iteration/static_tree.py), node for node the host builder's tree.
- `attach(cfg, pair, target, draft, engine) -> Attached | None`: its learned part opened for
  one generation (a trained drafter, a selector), handed to `build` as `state.attached` and
  kept fed by the decoding loop through `Attached`'s three calls.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from engine.draft import DecodeState, TreeBuilder
from engine.draft.growth import Plan
from engine.tree import Tree, TreeSampling


class Attached(Protocol):
    """A method's learned part during one generation (engine/decode.py calls these)."""

    def prefill(self, target) -> None:
        """After the target's forward over the prompt (the root excepted)."""

    def commit(self, target, path: list[int]) -> None:
        """After an iteration kept the root and the accepted nodes `path` in the caches."""

    def close(self) -> None:
        """When the generation ends, however it ends."""


def not_a_chain(cfg: Any) -> int:
    return 0


def no_width(cfg: Any) -> None:
    return None


@dataclass(frozen=True)
class Drafter:
    name: str  # the method's name in sweeps and on the command line
    config: type  # frozen dataclass of the method's parameters (the paper's names)
    build: Callable[[TreeBuilder, DecodeState, Any, torch.Generator], Tree]
    # how the trees' siblings are drawn; None: root-only trees, which every verifier accepts
    sampling: TreeSampling | None
    default_verifier: str  # at temperature > 0; temperature 0 uses "greedy"
    # bounds from the parameters alone (engine/tree_bounds.py), checked before any model loads:
    # the most nodes below the root of one tree (the size the papers budget), and the widest
    # node as (parameter, width) where its children must be distinct tokens (None: unbounded by
    # a parameter, or drawn i.i.d.)
    nodes: Callable[[Any], int]
    children: Callable[[Any], tuple[str, int] | None] = no_width
    # the parameter that budgets the tree's nodes (reports' x axis): a number, or a shape whose
    # node count is the budget (`nodes` of the config: SpecInfer's expansion widths)
    budget: str | None = None
    chain: Callable[[Any], int] = not_a_chain  # see the module docstring
    plan: Callable[[Any, DecodeState], Plan | None] | None = None  # the device plan, or None
    grow: Callable[..., tuple] | None = None
    attach: Callable[..., Attached | None] | None = None  # its learned part, or None
    model_free: bool = False  # never runs the draft model (a pair with `draft: none` runs it)
    # its paper's figures that `orch report` draws for its configs, by name
    # (orchestrator/results/paper/figures.py FIGURES)
    figures: tuple[str, ...] = ()
    # what a sweep measures before a config of it runs: cfg -> a line saying what, or None
    # (Sequoia's measured acceptance profile, orchestrator/acceptance.py); and the parameters
    # that run it alone instead (orch generate, the benchmarks: engine/methods.py standalone)
    measured_first: Callable[[Any], str | None] | None = None
    standalone: tuple[tuple[str, Any], ...] = ()


def full_tree(branch: int, depth: int, cap: int) -> int:
    """Nodes of a complete `branch`-ary tree of `depth` levels below the root, or `cap` + 1
    once it exceeds `cap` (the sum is never computed past the cap: depth may be huge)."""
    total, level = 0, 1
    for _ in range(depth):
        level *= branch
        total += level
        if total > cap:
            return cap + 1
    return total
