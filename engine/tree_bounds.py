"""Bounds on a method's draft trees from its parameters alone, so that a sweep or `orch generate`
can refuse a tree that is too large or wider than the vocabulary before any model loads.

`max_nodes(method)`: the most nodes below the root of one verified draft tree (the size the
papers budget: DySpec's and Sequoia's budget, DynaTree's N_max, DDTree's B, ...).

`max_children(method, temperature)`: the most children one node gets when its children must
be distinct tokens (top-k expansions, draws without replacement), so more children than the
vocabulary has tokens is a mistake; None where the method draws children i.i.d. at that
temperature (a token may repeat) or where no parameter sets the width (the method picks it
from the distributions and never exceeds the vocabulary).

`BOUNDS` maps every method of engine.drafters.DRAFTERS to its two functions over the parsed
config; a new method adds one entry (tests/engine/test_tree_bounds.py checks the registry is
complete and that generated trees stay within `max_nodes`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.config import ConfigError
from engine.methods import Method, tree_sampling


@dataclass(frozen=True)
class Bound:
    nodes: Callable[[Any], int]  # cfg -> most nodes below the root
    children: Callable[[Any], tuple[str, int] | None]  # cfg -> (parameter, width) or None


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


def _widths_nodes(widths: tuple[int, ...]) -> int:
    total, level = 0, 1
    for w in widths:
        level *= w
        total += level
    return total


BOUNDS: dict[str, Bound] = {
    "autoregressive": Bound(lambda c: 0, lambda c: None),
    "linear": Bound(lambda c: c.k, lambda c: None),
    "fixed_tree": Bound(
        lambda c: min(c.budget, full_tree(c.branch, c.depth, c.budget)),
        lambda c: ("branch", c.branch),
    ),
    "iid": Bound(lambda c: c.K * c.L, lambda c: ("K", c.K)),
    "delayed": Bound(lambda c: c.L1 + c.K * c.L2, lambda c: ("K", c.K)),
    "dynatree": Bound(  # paper: the top-1 root u0, then up to D_max levels below it
        lambda c: min(c.N_max, (c.variant == "paper") + full_tree(c.B_max, c.D_max, c.N_max)),
        lambda c: ("B_max", c.B_max),
    ),
    "dyspec": Bound(lambda c: c.budget, lambda c: None),
    "salf": Bound(lambda c: c.N, lambda c: None),
    "beam": Bound(lambda c: c.N, lambda c: ("top_k", c.top_k)),
    "ddtree": Bound(lambda c: c.B, lambda c: None),
    "specinfer": Bound(
        lambda c: _widths_nodes(c.widths),
        lambda c: ("expansion" if c.expansion else "k", max(c.widths)),
    ),
    "sequoia": Bound(lambda c: c.budget, lambda c: ("profile", len(c.profile))),
    "lookup": Bound(lambda c: c.k, lambda c: None),
    "lookup_tree": Bound(lambda c: min(c.budget, c.k * c.branches), lambda c: None),
    "lookup_hybrid": Bound(lambda c: c.N, lambda c: None),
}


def max_nodes(method: Method) -> int:
    return BOUNDS[method.name].nodes(method.cfg)


def max_children(method: Method, temperature: float) -> tuple[str, int] | None:
    """(parameter, width) when the width must fit the vocabulary at `temperature`, else None."""
    if tree_sampling(method.name, temperature) in (None, "iid"):
        return None
    return BOUNDS[method.name].children(method.cfg)


def check_vocab(method: Method, temperature: float, vocab: int, model: str) -> None:
    """ConfigError when a node would need more distinct children than `model` has tokens."""
    wide = max_children(method, temperature)
    if wide is not None and wide[1] > vocab:
        name, width = wide
        shown = f"{name}={width}" if name != "profile" else f"a profile of {width} ranks"
        raise ConfigError(
            f"method {method.name!r}: {shown} gives a node {width} children but the "
            f"vocabulary of {model} has {vocab} tokens"
        )
