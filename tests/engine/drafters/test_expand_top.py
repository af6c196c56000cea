"""TreeBuilder.expand_top: the builders that only rank children (greedy: every tree method but
Sequoia) build the same tree from a draft that returns each row's top-k alone (the fast path's
greedy draft step, engine/runtime/static.py) as from the full distributions."""

from __future__ import annotations

import pytest
import torch

from engine.draft import DraftModel, TreeBuilder
from engine.drafters import dyspec, iid, linear, salf
from engine.drafters.beam import build as beam
from engine.drafters.ddtree import build as ddtree
from engine.drafters.dynatree import build as dynatree
from engine.drafters.fixed_tree import build as fixed_tree
from engine.drafters.specinfer import build as specinfer
from engine.runtime.static import StaticCachedModel
from engine.sampling import Warp, top_probs
from tests.engine.drafters.fakes import PathFeed, random_next_probs, state

GEN = torch.Generator().manual_seed(0)

CASES = [
    (dynatree, dynatree.DynaTreeConfig(tau=0.0, N_max=40, rho_stop=0.001, rho_deep=0.01)),
    (dynatree, dynatree.DynaTreeConfig(variant="ours", tau=0.01, N_max=40)),
    (salf, salf.SALFConfig(N=30, B=4, th=0.0)),
    (salf, salf.SALFConfig(N=30, B=4, th=0.4)),
    (beam, beam.BeamConfig(N=25, top_k=4, depth=5)),
    (ddtree, ddtree.DDTreeConfig(B=30, L=5)),
    (dyspec, dyspec.DySpecConfig(budget=30)),
    (dyspec, dyspec.DySpecConfig(budget=30, variant="threshold", threshold=0.01)),
    (fixed_tree, fixed_tree.FixedTreeConfig(depth=4, branch=3, budget=30)),
    (specinfer, specinfer.SpecInferConfig(k=3, depth=3)),
    (iid, iid.IIDConfig(K=3, L=4)),
    (linear, linear.LinearConfig(k=6, stop_below=0.05)),
]


def _build(module, cfg, feed):
    b = TreeBuilder(feed, 0, keep_q=False)
    tree = module.build(b, state(), cfg, GEN)
    top_only = all(batch.probs is None for batch in b._batches)
    assert top_only == feed.top_only  # the top-only feed was asked for the top-k every time
    return tree.tokens.tolist(), tree.parents.tolist(), feed.fed


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(
    "module,cfg", CASES, ids=[f"{m.__name__[16:]}-{i}" for i, (m, _) in enumerate(CASES)]
)
def test_a_top_only_draft_builds_the_same_tree(module, cfg, seed):
    nxt = random_next_probs(vocab=40, seed=seed, sharpness=2.5)
    full, top = PathFeed(nxt), PathFeed(nxt, top_only=True)
    want = _build(module, cfg, full)
    assert len(want[0]) >= 5  # a real tree, not the root alone
    assert _build(module, cfg, top) == want  # same nodes, same parents, same forwards


def test_a_top_wider_than_the_vocabulary_gives_the_whole_vocabulary():
    b = TreeBuilder(PathFeed(random_next_probs(vocab=6), top_only=True), 0, keep_q=False)
    p, t = b.expand_top([0], 10)  # [1, 6] twice
    assert sorted(t[0].tolist()) == list(range(6)) and torch.all(p[0, :-1] >= p[0, 1:])
    assert b.vocab == 6 and b.expand_top([0], 10)[1].shape == (1, 6)
    with pytest.raises(ValueError, match="top-k only"):
        b.expand([0])


def test_top_probs_equals_the_softmax_top_k():
    logits = torch.randn(5, 1000, generator=torch.Generator().manual_seed(3)) * 4
    p, t = top_probs(logits, 7)
    want_p, want_t = torch.softmax(logits, -1).topk(7, -1)
    assert torch.equal(t, want_t) and torch.allclose(p, want_p, rtol=1e-5, atol=1e-7)


PROMPT = "def add(a, b):"


def _drafts(pair):
    """(fast, draft, builder): an eager and a fast greedy draft, each started on PROMPT."""
    model = pair.draft.model
    for lm in (None, StaticCachedModel(model)):
        draft = DraftModel(model, Warp(0.0), lm)
        yield lm is not None, draft, draft.start(pair.target.tokenizer.encode(PROMPT), keep_q=False)


def test_the_fast_draft_returns_the_top_k_from_its_forward(tiny_pair):
    """On the fast path a greedy draft's expand_top is the eager draft's expand().topk, and the
    batch holds no [n, V] distribution."""
    outs = []
    for fast, _, b in _drafts(tiny_pair):
        p, t = b.expand_top([0], 5)  # the first forward also feeds the committed prefix
        kids = [b.add(0, int(x)) for x in t[0, :3]]
        p2, t2 = b.expand_top(kids, 5)
        assert (b._batches[-1].probs is None) == fast
        outs.append((p, t, p2, t2))
    (p, t, p2, t2), (fp, ft, fp2, ft2) = outs
    assert torch.equal(t, ft) and torch.equal(t2, ft2)
    assert torch.allclose(p, fp, atol=1e-5) and torch.allclose(p2, fp2, atol=1e-5)


def test_the_fast_draft_rolls_the_chain_out_on_the_device(tiny_pair):
    """expand_chain on the fast path (DraftModel.feed_chain) gives the eager draft's
    one-expand_top-per-position chain, and its nodes sit where commit() looks for them."""
    root = len(tiny_pair.target.tokenizer.encode(PROMPT)) - 1  # the root's cache slot
    outs = []
    for fast, draft, b in _drafts(tiny_pair):
        assert (b.chain_feed is not None) == fast
        top_p, top_t, chain, host = b.expand_chain(6, 4)  # [6, 4] twice, 6 nodes
        assert chain == list(range(6)) and b.tokens[1:] == top_t[:5, 0].tolist()
        assert b.path_tokens(5) == top_t[:5, 0].tolist()
        assert [draft.path_slots[i][-1] for i in chain] == [root + i for i in chain]
        p, t = b.expand_top([3], 4)  # already fed: its row of the chain
        assert torch.equal(t[0], top_t[3]) and torch.equal(p[0], top_p[3])
        if fast:  # the feed's one read brought the whole top-k pair to the host
            assert host == (top_p.double().log().tolist(), top_t.tolist())
        else:
            assert host is None
        outs.append((top_p, top_t))
    (p, t), (fp, ft) = outs
    assert torch.equal(t, ft) and torch.allclose(p, fp, atol=1e-5)
