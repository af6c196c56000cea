"""TALF ("salf_talf.txt" Algorithm 1) and the distillation baseline on the tiny pair: the loss
by hand on a hand-made tree, the packed tree-attention forward against per-path forwards, the
target's training tree against EAGLE-2's beam builder, and a few steps that lower the loss."""

import torch

from engine.draft import DecodeState, DraftModel
from engine.drafters.beam import build as beam
from engine.sampling import Warp
from engine.train.distill import distill_loss, target_labels
from engine.train.talf import (
    Forest,
    TALFConfig,
    forest_logits,
    talf_loss,
    target_forest,
    tree_cross_entropy,
)
from engine.train.talf_train import trainable
from engine.tree import make_tree

SEQ = [256, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110]


def _path(forest: Forest, node: int) -> list[int]:
    """The plain token sequence x_[n] of a forest node: its root's prefix, then its path."""
    L = forest.tree.size - int((forest.tree.depth != torch.arange(forest.tree.size)).sum())
    parents, tokens = forest.tree.parents.tolist(), forest.tree.tokens.tolist()
    path = []
    while node >= L:
        path.append(tokens[node])
        node = parents[node]
    return tokens[: node + 1] + path[::-1]


def _last_logits(model, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0, -1]  # [V]


def test_loss_on_a_hand_made_tree_is_the_per_node_cross_entropy(llama_pair):
    draft = llama_pair.draft.model
    # sequence 0..4; root s=2 with children a (node 5), b (node 6); a's child c (node 7);
    # root s=4 with child d (node 8). Trained nodes: both roots, a, c and d (b a leaf).
    seq = [256, 65, 66, 67, 68]
    tree = make_tree(seq + [70, 71, 72, 73], [-1, 0, 1, 2, 3, 2, 2, 5, 4])
    rows = torch.tensor([2, 4, 5, 7, 8])
    gen = torch.Generator().manual_seed(0)
    labels = torch.softmax(torch.randn(5, 260, generator=gen) * 3, dim=-1)  # [5, V]
    forest = Forest(tree, rows, labels, torch.tensor([0, 1, 0, 0, 1]), (2, 4))
    paths = [seq[:3], seq, seq[:3] + [70], seq[:3] + [70, 72], seq + [73]]
    by_hand = 0.0
    for p, ids in zip(labels, paths):
        log_q = torch.log_softmax(_last_logits(draft, ids), dim=-1)
        by_hand += -sum(float(p[v]) * float(log_q[v]) for v in range(260))  # L_n, l. 7
    with torch.no_grad():
        loss = talf_loss(draft, forest)
    assert abs(float(loss) - by_hand / 2) < 1e-3 * by_hand  # sum over G, mean over 2 trees
    # the loss function alone, on given logits
    logits = torch.randn(5, 260, generator=gen)
    ce = -(labels * torch.log_softmax(logits, -1)).sum()
    assert torch.allclose(tree_cross_entropy(logits, forest), ce / 2)


def test_packed_forward_equals_per_path_forwards(llama_pair):
    target, draft = llama_pair.target.model, llama_pair.draft.model
    forest = target_forest(target, SEQ, [3, 6, 10], TALFConfig(top_k=3, depth=3))
    # 3 roots; depth 1: 3 nodes each; depth 2: the best 3 of 9 each -> 7 trained nodes a tree
    assert forest.rows.shape == (21,) and forest.labels.shape == (21, 260)
    assert forest.owner.bincount().tolist() == [7, 7, 7]
    with torch.no_grad():
        got = forest_logits(draft, forest)  # [21, V]
    for r, node in enumerate(forest.rows.tolist()):
        ids = _path(forest, node)
        assert len(ids) == forest.tree.depth[node] + 1
        torch.testing.assert_close(got[r], _last_logits(draft, ids), atol=1e-4, rtol=1e-4)
        p = torch.softmax(_last_logits(target, ids), dim=-1)  # the soft label p_child(n)
        torch.testing.assert_close(forest.labels[r], p, atol=1e-5, rtol=1e-4)


def test_target_tree_is_eagle2_beam_search_with_the_target(llama_pair):
    """Algorithm 1 l. 2: per root, the nodes the target expands are exactly those that
    engine/drafters/beam/build.py expands when the target is its model (top_k 4, depth 3)."""
    target = llama_pair.target.model
    roots = [4, 9]
    forest = target_forest(target, SEQ, roots, TALFConfig(top_k=4, depth=3))
    for r, s in enumerate(roots):
        mine = sorted(tuple(_path(forest, n)) for n in forest.rows[forest.owner == r].tolist())
        dm = DraftModel(target, Warp(0.0, 1.0))
        builder = dm.start(SEQ[: s + 1])
        expanded: list[int] = []
        feed = builder.feed

        def recording(b, new, feed=feed, **kw):
            expanded.extend(new)
            return feed(b, new, **kw)

        builder.feed = recording
        state = DecodeState(prefix_len=s, root_token=SEQ[s], warp=Warp(0.0, 1.0), remaining=64)
        beam.build(builder, state, beam.BeamConfig(N=64, top_k=4, depth=3), None)
        theirs = sorted(tuple(SEQ[: s + 1] + builder.path_tokens(n)) for n in expanded)
        assert len(mine) == 9 and mine == theirs


def test_distillation_is_the_root_only_tree(llama_pair):
    target, draft = llama_pair.target.model, llama_pair.draft.model
    roots = [2, 5, 11]
    labels = target_labels(target, SEQ, roots)
    one = target_forest(target, SEQ, roots, TALFConfig(depth=1))
    assert torch.equal(labels.rows, one.rows) and labels.tree.size == len(SEQ)
    torch.testing.assert_close(labels.labels, one.labels)
    by_hand = 0.0
    for s in roots:  # Sec. 2.2 L_cls at each position
        p = torch.softmax(_last_logits(target, SEQ[: s + 1]), -1)
        by_hand += float(-(p * torch.log_softmax(_last_logits(draft, SEQ[: s + 1]), -1)).sum())
    with torch.no_grad():
        assert abs(float(distill_loss(draft, labels)) - by_hand / 3) < 1e-4 * by_hand


def test_training_the_top_layer_lowers_the_talf_loss():
    from engine.models import load_model

    target = load_model("tiny-llama").model
    draft = load_model("tiny-llama-draft").model
    params = trainable(draft, 1)
    assert sorted({k.split(".")[2] for k in params if ".layers." in k}) == ["3"]
    assert "model.norm.weight" in params and "lm_head.weight" not in params
    for p in params.values():
        p.requires_grad_(True)
    forest = target_forest(target, SEQ, [3, 7])
    opt = torch.optim.AdamW(list(params.values()), lr=1e-3)
    before = [p.clone() for n, p in draft.named_parameters() if n not in params]
    losses = []
    for _ in range(5):
        loss = talf_loss(draft, forest)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(b < a for a, b in zip(losses, losses[1:]))
    after = [p for n, p in draft.named_parameters() if n not in params]
    assert all(torch.equal(a, b) for a, b in zip(before, after))  # the frozen part stays
