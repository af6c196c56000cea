"""engine.tree_bounds: every method has bounds, generated trees stay within them, and widths
above the vocabulary are refused where children must be distinct tokens."""

import pytest

from engine.config import ConfigError
from engine.decode import generate
from engine.drafters.record import full_tree
from engine.methods import resolve_method
from engine.tree_bounds import check_vocab, max_children, max_nodes
from tests.method_cases import SMALL


def test_full_tree_stops_at_the_cap():
    assert full_tree(2, 3, 100) == 14
    assert full_tree(10**6, 10**9, 4096) == 4097  # never computes the huge sum


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("name", sorted(SMALL))
def test_generated_trees_stay_within_max_nodes(name, temperature, llama_pair):
    m = resolve_method(name, dict(SMALL[name]), temperature)
    g = generate(llama_pair, [256, 72, 105, 33], m, 8, temperature=temperature, seed=1)
    sizes = [it.tree_size - 1 for it in g.stats.iterations]  # below the root
    assert max(sizes) <= max_nodes(m), (name, sizes)


def test_vocabulary_checks_follow_the_tree_sampling():
    wide = resolve_method("fixed_tree", {"branch": 300, "budget": 400}, 0.0)
    assert max_children(wide, 0.0) == ("branch", 300)
    with pytest.raises(ConfigError, match="branch=300 gives a node 300 children but the "):
        check_vocab(wide, 0.0, 260, "tiny-llama")
    check_vocab(wide, 0.0, 300, "m")  # exactly the vocabulary is fine
    # i.i.d. children may repeat a token: more rollouts than tokens is legitimate
    iid = resolve_method("iid", {"K": 300, "L": 1}, 1.0)
    assert max_children(iid, 1.0) is None
    check_vocab(iid, 1.0, 260, "tiny-llama")
    # SpecInfer's k-ary trees are top-k at temperature 0, i.i.d. above it
    k = resolve_method("specinfer", {"k": 300, "depth": 1}, 0.0)
    with pytest.raises(ConfigError, match="k=300"):
        check_vocab(k, 0.0, 260, "t")
    check_vocab(resolve_method("specinfer", {"k": 300, "depth": 1}, 1.0), 1.0, 260, "t")
    seq = resolve_method("sequoia", {"profile": [0.001] * 300}, 0.0)
    with pytest.raises(ConfigError, match="a profile of 300 ranks gives a node 300 children"):
        check_vocab(seq, 0.0, 260, "t")
