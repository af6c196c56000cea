"""bench/lookup_tune.py's offline replay is what decoding does: replaying a lookup config
against the autoregressive output gives the same iterations (forward size, tokens committed)
as running that method through the engine, greedy, on both tiny families."""

import pytest

from bench import lookup_tune
from engine.decode import generate
from engine.drafters.prompt_lookup import LookupConfig


@pytest.mark.parametrize(
    "label, method, params",
    [
        ("linear", "lookup", {"k": 3, "min_ngram": 1}),
        ("tree", "lookup_tree", {"k": 3, "branches": 2, "budget": 4}),
    ],
)
def test_replay_matches_engine_iterations(tiny_pair, label, method, params):
    prompt = list(b"abcabcabd xyz abcabcabd xyz abca")
    ar = list(generate(tiny_pair, prompt, "autoregressive", 40).tokens)
    g = generate(tiny_pair, prompt, method, 40, params=params)
    assert list(g.tokens) == ar
    if label == "linear":
        propose = lookup_tune.linear(LookupConfig(**params))
    else:
        propose = lookup_tune.tree(3, 1, params["k"], params["branches"], params["budget"])
    replayed = lookup_tune.replay(prompt, ar, propose)
    engine = [(it.tree_size, it.emitted) for it in g.stats.iterations]
    assert replayed == engine
    assert any(n > 1 for n, _ in engine), "the prompt must give lookup something to match"


def test_accepted_on_paths_takes_the_longest_agreeing_path():
    assert lookup_tune.accepted_on_paths([(1, 2, 3), (1, 4)], [1, 4, 9]) == 2
    assert lookup_tune.accepted_on_paths([(1, 2, 3)], [1, 2, 3, 4]) == 3
    assert lookup_tune.accepted_on_paths([], [5]) == 0
    assert lookup_tune.trie_size([(1, 2, 3), (1, 4)]) == 4
