"""HASS's loss for the EAGLE head (engine/train/hass.py): the top-K distillation and the
levels' mask by hand, every level's rows against a plain drafting loop (committed rows on the
target's features, then the head's own outputs fed back), depth 1 as EAGLE's loss plus the
distillation, and a HASS run continuing an EAGLE-trained head."""

from __future__ import annotations

import math

import pytest
import torch

from engine import checkpoint
from engine.runtime.eagle_head import EagleHead, head_config
from engine.train.eagle import TrainConfig, train
from engine.train.eagle_loss import eagle_loss
from engine.train.hass import hass_loss, hass_rows, level_mask, topk_distillation


def test_topk_distillation_by_hand():
    """p = (0.5, 0.3, 0.2), q uniform over 3, K = 2: -(0.5 + 0.3) log(1/3)."""
    target = torch.tensor([0.5, 0.3, 0.2]).log()
    got = topk_distillation(target, torch.zeros(3), 2)
    assert got.item() == pytest.approx(0.8 * math.log(3))
    assert topk_distillation(target, torch.zeros(3), 3).item() == pytest.approx(math.log(3))


def test_level_mask_by_hand():
    """n = 4 rows, level 3: row 3 (depth 2 below root 1) sees level-1 rows 0-1, level-2 row 2
    and itself; row 2 sees level-1 row 0, level-2 row 1, itself; rows 0-1 only themselves."""
    m = level_mask(4, 3).int().view(4, 3, 4)
    want = torch.tensor(
        [
            [[0, 0, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0]],
            [[0, 0, 0, 0], [0, 0, 0, 0], [0, 1, 0, 0]],
            [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]],
            [[1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]],
        ]
    )
    assert torch.equal(m, want)
    assert torch.equal(level_mask(3, 1), torch.ones(3, 3).tril().bool())


@pytest.fixture
def parts(llama_pair):
    model = llama_pair.target.model
    torch.manual_seed(4)
    head = EagleHead(head_config(model.config))
    gen = torch.Generator().manual_seed(5)
    tokens = torch.randint(0, 260, (2, 7), generator=gen)
    feats = torch.randn(2, 7, 64, generator=gen)
    return head, model.get_input_embeddings(), model.get_output_embeddings(), tokens, feats


@torch.no_grad()
def test_levels_are_the_drafting_loop(parts):
    """Level k, row i: the head run from scratch over the committed rows 0 .. i-k+1 (the
    target's features), then the chain x_{i-k+3} .. x_{i+1}, each paired with the previous
    row's output, as drafting feeds a depth-(k-1) node."""
    head, embed, _, tokens, feats = parts
    levels = hass_rows(head, embed, tokens, feats, depth=3)
    for b in range(2):
        for k, out in enumerate(levels, 1):
            for i in range(k - 1, 6):
                root = i - k + 1
                toks, fs = list(tokens[b, 1 : root + 2]), list(feats[b, : root + 1])
                for j in range(root + 1, i + 1):  # the chain rows, own features fed back
                    o, _ = head(embed(torch.stack(toks))[None], torch.stack(fs)[None],
                                torch.arange(len(toks))[None])  # fmt: skip
                    toks.append(tokens[b, j + 1])
                    fs.append(o[0, -1])
                o, _ = head(embed(torch.stack(toks))[None], torch.stack(fs)[None],
                            torch.arange(len(toks))[None])  # fmt: skip
                torch.testing.assert_close(out[b, i], o[0, -1], atol=2e-5, rtol=0)


@torch.no_grad()
def test_depth_one_is_eagles_loss_plus_the_distillation(parts):
    head, embed, lm_head, tokens, feats = parts
    h = hass_loss(head, embed, lm_head, tokens, feats, depth=1, lambda_distil=0.0)
    e = eagle_loss(head, embed, lm_head, tokens, feats)
    assert h.loss.item() == pytest.approx(e.loss.item(), rel=1e-6)
    with_distil = hass_loss(head, embed, lm_head, tokens, feats, depth=1, top_k=260)
    # K = V: the distillation is the whole cross-entropy
    assert with_distil.loss.item() == pytest.approx(e.loss.item() + 10 * e.cls.item(), rel=1e-5)


def test_hass_continues_an_eagle_head(tmp_path, monkeypatch):
    monkeypatch.setenv("ORCH_HOME", str(tmp_path))
    run = dict(target="tiny-llama", sequences=4, seq_len=32, batch=2, save_every=5)
    train("e", TrainConfig(steps=2, **run))
    h = train("h", TrainConfig(steps=2, loss="hass", init="eagle:e", **run))
    assert h.done and h.config["loss"] == "hass" and h.config["init"] == "eagle:e"
    we, wh = checkpoint.load("e")[1]["weights"], checkpoint.load("h")[1]["weights"]
    assert we.keys() == wh.keys() and any(not torch.equal(we[k], wh[k]) for k in we)
