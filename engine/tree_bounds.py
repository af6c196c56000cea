"""Bounds on a method's draft trees from its parameters alone, so that a sweep or `orch generate`
can refuse a tree that is too large or wider than the vocabulary before any model loads.

`max_nodes(method)`: the most nodes below the root of one verified draft tree (the size the
papers budget: DySpec's and Sequoia's budget, DynaTree's N_max, DDTree's B, ...).

`max_children(method, temperature)`: the most children one node gets when its children must
be distinct tokens (top-k expansions, draws without replacement), so more children than the
vocabulary has tokens is a mistake; None where the method draws children i.i.d. at that
temperature (a token may repeat) or where no parameter sets the width (the method picks it
from the distributions and never exceeds the vocabulary).

Both read the method's record (engine/drafters/record.py `nodes` and `children`, functions of
the parsed config); tests/engine/test_tree_bounds.py checks that generated trees stay within
`max_nodes`.
"""

from __future__ import annotations

from engine.config import ConfigError
from engine.drafters import DRAFTERS
from engine.methods import Method, tree_sampling


def max_nodes(method: Method) -> int:
    return DRAFTERS[method.name].nodes(method.cfg)


def max_children(method: Method, temperature: float) -> tuple[str, int] | None:
    """(parameter, width) when the width must fit the vocabulary at `temperature`, else None."""
    if tree_sampling(method.name, temperature) in (None, "iid"):
        return None
    return DRAFTERS[method.name].children(method.cfg)


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
