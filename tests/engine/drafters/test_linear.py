"""Linear drafting's confidence stop (engine/drafters/linear.py `stop_below`)."""

from __future__ import annotations

import pytest
import torch

from engine.drafters.linear import LinearConfig, build
from tests.engine.drafters.fakes import fake_builder, state

TOP = [0.9, 0.8, 0.3, 0.9, 0.9, 0.9]  # the draft's probability of its top token at each depth
V = 8


def next_probs(path: tuple[int, ...]) -> torch.Tensor:
    """Top token len(path) + 1 with probability TOP[len(path)], the rest spread evenly."""
    p = torch.full((V,), (1 - TOP[len(path)]) / (V - 1))
    p[len(path) + 1] = TOP[len(path)]
    return p


@pytest.mark.parametrize(
    "stop_below,want",
    [
        (0.0, [1, 2, 3, 4, 5]),  # the paper's chain: k tokens whatever the confidence
        (0.5, [1, 2, 3]),  # the 0.3 token is drafted, then the chain ends
        (0.85, [1, 2]),  # the first token (0.9) passes, the second (0.8) is below: kept, stop
        (0.95, [1]),  # below on the first token: one token, never an empty draft
    ],
)
def test_chain_ends_after_the_first_token_below_stop_below(stop_below, want):
    tree = build(fake_builder(next_probs), state(), LinearConfig(k=5, stop_below=stop_below), None)
    assert tree.tokens[1:].tolist() == want
    assert tree.parents.tolist() == list(range(-1, len(want)))


def test_stop_below_is_a_probability():
    with pytest.raises(ValueError, match="stop_below must be in"):
        LinearConfig(stop_below=1.5)


def test_stop_below_leaves_the_resolved_params_unchanged_at_its_default():
    """A parameter added later (engine/config.py ADDED_LATER): linear trials stored before it
    existed keep their config hashes."""
    from engine.methods import method_params, resolve_method

    assert method_params(resolve_method("linear", {"k": 3})) == {"k": 3, "verifier": "greedy"}
    got = method_params(resolve_method("linear", {"k": 3, "stop_below": 0.4}))
    assert got == {"k": 3, "stop_below": 0.4, "verifier": "greedy"}
