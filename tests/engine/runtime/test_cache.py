"""KV cache: tree append + compaction equals running the accepted tokens sequentially."""

import torch

from engine.draft import DraftModel
from engine.runtime.eager import CachedModel
from engine.sampling import Warp
from engine.tree import make_tree
from tests.engine.runtime.cache_helpers import PARENTS, PROMPT, TOKENS


def assert_same_cache(a: CachedModel, b: CachedModel):
    assert a.length == b.length == a.committed == b.committed
    for la, lb in zip(a.cache.layers, b.cache.layers):
        torch.testing.assert_close(la.keys, lb.keys, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(la.values, lb.values, atol=1e-5, rtol=1e-4)


def test_compaction_equals_sequential_prefill(tiny_pair):
    model = tiny_pair.target.model
    tree = make_tree(TOKENS, PARENTS)
    lm = CachedModel(model)
    lm.extend(PROMPT[:-1])
    prefix = lm.committed
    tree_logits = lm.forward(tree.tokens, tree.position_ids(prefix)[0], tree.visibility(prefix))
    path = tree.path_to(9)
    lm.commit([prefix + i for i in [0] + path])

    ref = CachedModel(model)
    seq = PROMPT + [TOKENS[i] for i in path]
    ref_logits = ref.extend(seq, keep=0)
    torch.testing.assert_close(CachedModel(model).extend(seq), ref_logits[-1:])
    assert_same_cache(lm, ref)
    # the tree forward gave every node on the path the logits of the sequential run
    torch.testing.assert_close(
        tree_logits[[0] + path], ref_logits[len(PROMPT) - 1 :], atol=1e-4, rtol=1e-4
    )
    # and decoding continues identically from the compacted cache
    nxt = torch.tensor([99])
    pos = torch.tensor([lm.length])
    torch.testing.assert_close(lm.forward(nxt, pos), ref.forward(nxt, pos), atol=1e-4, rtol=1e-4)


def test_draft_builder_matches_sequential_and_compacts(tiny_pair):
    """Draft distributions below every node equal a sequential run, with committed tokens the
    draft has not seen yet riding along in the first forward; compaction keeps the accepted
    path the draft has seen."""
    model = tiny_pair.draft.model
    d = DraftModel(model, Warp(0.0))
    d.lm.extend(PROMPT[:5])  # the draft has seen only part of the committed prefix
    b = d.start(PROMPT)
    assert d.pending == PROMPT[5:-1]
    for parent, token in zip(PARENTS[1:], TOKENS[1:]):
        b.add(parent, token)
    for level in [[0], [1, 2, 12], [3, 4, 5], [6, 7, 8]]:  # one draft forward per level
        probs = b.expand(level)
        for row, node in zip(probs, level):
            seq_logits = CachedModel(model).extend(PROMPT + b.path_tokens(node))
            torch.testing.assert_close(row, torch.softmax(seq_logits[-1], -1), atol=1e-5, rtol=1e-4)
    assert b.size == len(TOKENS)
    path = [1, 3, 6, 9]  # node 9 is a leaf that was never expanded: the draft has no KV for it
    d.commit(path)
    ref = CachedModel(model)
    ref.extend(PROMPT + [TOKENS[i] for i in path[:-1]])
    assert_same_cache(d.lm, ref)


def test_commit_follows_the_renumbering_of_tree(llama_pair):
    """After tree(keep=..., order=...) the decode loop's path is in the tree's numbering;
    commit() maps it back to the builder's nodes and keeps their cache slots."""
    model = llama_pair.draft.model
    d = DraftModel(model, Warp(0.0))
    b = d.start(PROMPT)
    for parent, token in zip(PARENTS[1:], TOKENS[1:]):
        b.add(parent, token)
    for level in [[0], [1, 2, 12], [3, 4, 5], [6, 7, 8]]:
        b.expand(level)
    order = [0, 12, 2, 1, 3, 6, 9]  # drops 4, 5, 7, 8, 10, 11; builder path 1-3-6-9 ...
    tree = b.tree(keep=sorted(order), order=order)
    assert tree.path_to(6) == [3, 4, 5, 6]  # ... is tree path 3-4-5-6
    d.commit([3, 4, 5, 6])
    ref = CachedModel(model)
    ref.extend(PROMPT + [TOKENS[i] for i in [1, 3, 6]])  # node 9 was never fed
    assert_same_cache(d.lm, ref)


def test_expand_requires_ancestors_first(llama_pair):
    d = DraftModel(llama_pair.draft.model, Warp(0.0))
    b = d.start(PROMPT)
    child = b.add(0, 5)
    grandchild = b.add(child, 6)
    try:
        b.expand([grandchild])
    except ValueError as e:
        assert "ancestor" in str(e)
    else:
        raise AssertionError("expand() of a node whose parent was never fed must fail")
    # expanding the whole chain in one call is fine
    assert b.expand([0, child, grandchild]).shape == (3, llama_pair.draft.model.config.vocab_size)
