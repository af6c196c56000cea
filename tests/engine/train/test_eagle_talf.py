"""TALF for the EAGLE head (engine/train/eagle_talf.py): on the target's beam forest, a zeroed
head's loss by hand (every node's L_n is log V), every node's row against a plain drafting
loop (the root's committed rows on the target's features, then the path with the head's own
outputs fed back), and a TALF run continuing an EAGLE-trained head."""

from __future__ import annotations

import math

import pytest
import torch

from engine import checkpoint
from engine.runtime.eagle_head import EagleHead, head_config
from engine.train.eagle import TrainConfig, train
from engine.train.eagle_talf import build_forests, eagle_talf_loss, forest_rows
from engine.train.talf import TALFConfig


@pytest.fixture
def setting(llama_pair):
    model = llama_pair.target.model
    gen = torch.Generator().manual_seed(8)
    tokens = torch.randint(0, 256, (2, 12), generator=gen)
    with torch.no_grad():
        feats = [
            model(input_ids=s[None], output_hidden_states=True).hidden_states[-1][0] for s in tokens
        ]
    forests = build_forests(model, tokens, 3, TALFConfig(top_k=4, depth=3), gen)
    return model, tokens, feats, forests


def test_zeroed_head_loss_by_hand(setting):
    """A head of zeros outputs 0 everywhere, so p(d) is uniform over V = 260 and L_n =
    log 260 for each node; G holds the root, its 4 children and the 4 expanded grandchildren
    (beam k = 4, depth 3): L = 9 log 260 per root, the mean over roots and sequences too."""
    model, _, feats, forests = setting
    head = EagleHead(head_config(model.config))
    with torch.no_grad():
        for p in head.parameters():
            p.zero_()
    assert all(len(f.rows) == 3 * 9 and len(f.roots) == 3 for f in forests)
    parts = eagle_talf_loss(
        head, model.get_input_embeddings(), model.get_output_embeddings(), forests, feats
    )
    assert parts.loss.item() == pytest.approx(9 * math.log(260), rel=1e-6)
    assert parts.reg.item() == 0.0  # no regression loss (Sec. 3.2)


@torch.no_grad()
def test_every_node_is_the_drafting_loop(setting):
    model, tokens, feats, forests = setting
    torch.manual_seed(2)
    head = EagleHead(head_config(model.config))
    embed = model.get_input_embeddings()
    for seq, f, forest in zip(tokens, feats, forests):
        out = forest_rows(head, embed, forest, f)  # [T-1, H]
        parents = forest.tree.parents.tolist()
        toks_all = forest.tree.tokens.tolist()
        n_seq = seq.numel()
        for node in forest.rows.tolist():
            path = []
            while node >= n_seq:  # up to the root, a sequence position
                path.append(node)
                node = parents[node]
            root, path = node, path[::-1]
            toks, fs = list(seq[1 : root + 1]), list(f[:root])
            for n in path:  # the chain below the root, own features fed back
                o, _ = head(embed(torch.stack(toks))[None], torch.stack(fs)[None],
                            torch.arange(len(toks))[None])  # fmt: skip
                toks.append(torch.tensor(toks_all[n]))
                fs.append(o[0, -1])
            o, _ = head(embed(torch.stack(toks))[None], torch.stack(fs)[None],
                        torch.arange(len(toks))[None])  # fmt: skip
            last = path[-1] if path else root
            torch.testing.assert_close(out[last - 1], o[0, -1], atol=2e-5, rtol=0)


def test_talf_continues_an_eagle_head(tmp_path, monkeypatch):
    monkeypatch.setenv("ORCH_HOME", str(tmp_path))
    run = dict(target="tiny-llama", sequences=4, seq_len=24, batch=2, save_every=5)
    train("e", TrainConfig(steps=2, **run))
    t = train("t", TrainConfig(steps=2, loss="talf", init="eagle:e", roots=3, **run))
    assert t.done and t.config["loss"] == "talf" and t.config["tree_k"] == 4
    we, wt = checkpoint.load("e")[1]["weights"], checkpoint.load("t")[1]["weights"]
    assert any(not torch.equal(we[k], wt[k]) for k in we)
