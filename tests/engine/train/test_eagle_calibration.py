"""The Fig. 2(b) diagnostic (engine/train/eagle_calibration.py): Appendix A's accuracy and ECE on
a hand-computed case, the batched p(d)_{s+2} and x~_{s+2} against a plain loop that appends
each token and runs the head and the target causally from scratch, the positions drawn with
an explicit generator, and the held-out split it reads."""

from __future__ import annotations

import pytest
import torch

from engine.config import ConfigError
from engine.runtime.eagle_head import EagleHead, head_config
from engine.train import eagle_data
from engine.train.eagle_calibration import (
    Diagnostic,
    calibration,
    chunk_draws,
    draw_positions,
    expected_calibration_error,
    rank_metrics,
)


def test_ece_and_accuracy_by_hand():
    """M = 10 bins ((m-1)/10, m/10]: 0.05 alone in B_1 (wrong: |0 - 0.05|), 0.15 and 0.12 in
    B_2 (one right: |1/2 - 0.135|, weight 2), 0.85 in B_9 and 0.95 in B_10 (right: 0.15,
    0.05). ECE = (0.05 + 2 * 0.365 + 0.15 + 0.05) / 5 = 0.196; one bin: |3/5 - 2.12/5|."""
    conf = torch.tensor([0.05, 0.15, 0.12, 0.95, 0.85])
    right = torch.tensor([False, True, False, True, True])
    assert expected_calibration_error(conf, right, 10) == pytest.approx(0.196)
    assert expected_calibration_error(conf, right, 1) == pytest.approx(abs(0.6 - 2.12 / 5))
    # the edges: 0 falls in B_1, 1 in B_M, 0.5 in (4/10, 5/10] with 0.45 (not in B_6 with 0.55)
    edge = torch.tensor([0.0, 1.0, 0.5, 0.45, 0.55])
    ok = torch.tensor([False, True, True, False, True])
    assert expected_calibration_error(edge, ok, 10) == pytest.approx(
        (0.0 + 0.0 + 2 * abs(1 / 2 - 0.475) + abs(1 - 0.55)) / 5
    )
    perfect = expected_calibration_error(torch.tensor([1.0, 0.0]), torch.tensor([True, False]))
    assert perfect == 0.0
    # per rank (columns): accuracy, ECE and count of each
    rows = rank_metrics(torch.stack([conf, conf.flip(0)], 1), torch.stack([right, right], 1), 10)
    assert [r.rank for r in rows] == [1, 2] and all(r.count == 5 for r in rows)
    assert rows[0].accuracy == pytest.approx(0.6) and rows[0].ece == pytest.approx(0.196)
    assert rows[1].ece == pytest.approx(
        expected_calibration_error(conf.flip(0), right, 10)
    )  # fmt: skip


@pytest.fixture
def setting(llama_pair):
    """The tiny target, its features over two random chunks, a seeded random head."""
    model = llama_pair.target.model
    gen = torch.Generator().manual_seed(5)
    tokens = torch.randint(0, 256, (2, 10), generator=gen)  # [S, T]
    with torch.no_grad():
        feats = torch.stack(
            [
                model(input_ids=s[None], output_hidden_states=True).hidden_states[-1][0]
                for s in tokens
            ]
        )  # [S, T, H]
    torch.manual_seed(4)
    head = EagleHead(head_config(model.config)).eval()
    with torch.no_grad():  # sharper distributions than the initialisation's
        head.fc.weight.mul_(4.0)
    return model, head, tokens, feats


@torch.no_grad()
def plain_loop(model, head, tokens, feats, r: int, ranks: int):
    """At root r (x_s = tokens[r]): the head over rows (x_{j+1}, f_j) from scratch, its n-th
    token appended with the last row's output feature, the head from scratch again; the
    target from scratch over x_{1:s} and the token. [(token, head logits [V], target token)]."""
    embed, lm_head = model.get_input_embeddings(), model.get_output_embeddings()
    emb = embed(tokens[1 : r + 1])[None]  # [1, r, H]
    out, _ = head(emb, feats[:r][None], torch.arange(r)[None])
    f_s = out[0, -1]  # f(d)_s
    first = lm_head(f_s)  # [V] p(d)_{s+1}
    order = torch.argsort(first, descending=True)
    got = []
    for n in range(ranks):
        y = order[n]
        emb2 = embed(torch.cat([tokens[1 : r + 1], y[None]]))[None]  # [1, r + 1, H]
        feat2 = torch.cat([feats[:r], f_s[None]])[None]
        out2, _ = head(emb2, feat2, torch.arange(r + 1)[None])
        logits = lm_head(out2[0, -1])  # [V] p(d)_{s+2}
        seq = torch.cat([tokens[: r + 1], y[None]])[None]
        target = model(input_ids=seq).logits[0, -1].argmax()  # x~_{s+2}
        got.append((int(y), logits, int(target)))
    return got


def test_draws_are_the_plain_loop(setting):
    model, head, tokens, feats = setting
    ranks = 4
    confidence, correct = [], []
    for c in range(2):
        roots = torch.tensor([1, 2, 5, 9])  # every x_s possible: 1 .. T-1
        d = chunk_draws(head, model, tokens[c], feats[c], roots, ranks)
        assert d.drafted.shape == (4, ranks) and d.head_logits.shape == (4, ranks, 260)
        for i, r in enumerate(roots.tolist()):
            for n, (y, logits, target) in enumerate(plain_loop(model, head, tokens[c], feats[c], r, ranks)):  # fmt: skip
                assert int(d.drafted[i, n]) == y, (c, r, n)
                torch.testing.assert_close(d.head_logits[i, n], logits, atol=2e-5, rtol=0)
                assert int(d.target_next[i, n]) == target, (c, r, n)
        for r in range(1, 10):  # every position, for the metrics below
            loop = plain_loop(model, head, tokens[c], feats[c], r, ranks)
            p = torch.stack([torch.softmax(lg, -1)[t] for _, lg, t in loop])  # [n]
            confidence.append(p)
            correct.append(torch.tensor([int(lg.argmax()) == t for _, lg, t in loop]))
    want = rank_metrics(torch.stack(confidence), torch.stack(correct), 10)
    got = calibration(head, model, tokens, feats, ranks, 10, positions=None)
    assert [r.count for r in got] == [18] * ranks
    for g, w in zip(got, want):
        assert g.rank == w.rank and g.accuracy == w.accuracy
        assert g.ece == pytest.approx(w.ece, abs=1e-5)
    # the ranks differ: what the target does next depends on the token fed back
    assert len({tuple(d.target_next[:, n].tolist()) for n in range(ranks)}) > 1
    with pytest.raises(ValueError, match="roots"):
        chunk_draws(head, model, tokens[0], feats[0], torch.tensor([0]), ranks)


def test_positions_are_drawn_with_the_generator(setting):
    picks = draw_positions(3, 10, 7, torch.Generator().manual_seed(1))  # [7, 2]
    again = draw_positions(3, 10, 7, torch.Generator().manual_seed(1))
    assert torch.equal(picks, again) and picks.shape == (7, 2)
    assert len({tuple(p) for p in picks.tolist()}) == 7  # without replacement
    assert picks[:, 0].max() < 3 and picks[:, 1].min() >= 1 and picks[:, 1].max() <= 9
    other = draw_positions(3, 10, 7, torch.Generator().manual_seed(2))
    assert not torch.equal(picks, other)
    every = draw_positions(3, 10, None, torch.Generator())
    assert every.shape == (27, 2) and every[:9, 0].eq(0).all()
    with pytest.raises(ConfigError, match="--positions must be 0 \\(all\\) or in 1 .. 27"):
        draw_positions(3, 10, 28, torch.Generator())
    # the drawn positions decide the result; the same generator state, the same result
    model, head, tokens, feats = setting
    a = calibration(head, model, tokens, feats, 2, 5, 6, torch.Generator().manual_seed(3))
    b = calibration(head, model, tokens, feats, 2, 5, 6, torch.Generator().manual_seed(3))
    assert a == b and a[0].count == 6


def test_config_is_checked():
    for kwargs, message in [
        (dict(heads=()), "at least one"),
        (dict(heads=("tiny-llama",)), "an EAGLE head"),
        (dict(heads=("eagle:a", "eagle:a")), "each head once"),
        (dict(ranks=0), "--ranks must be >= 1"),
        (dict(bins=0), "--bins must be >= 1"),
        (dict(sequences=0), "--sequences must be >= 1"),
        (dict(seq_len=1), "--seq-len must be >= 2"),
        (dict(positions=0), "--positions"),
        (dict(sequences=2, seq_len=5, positions=9), "1 .. 8"),
    ]:
        with pytest.raises(ConfigError, match=message):
            Diagnostic(**{"heads": ("eagle:a",), "target": "tiny-llama", **kwargs})


def test_held_out_split_reads_only_held_out_files(tmp_path, llama_pair):
    root = tmp_path / "lib"
    root.mkdir()
    for i in range(40):
        (root / f"m{i:02d}.py").write_text(f"# module {i}\nx = {i}\n" * 20)
    tok = llama_pair.target.tokenizer
    test = eagle_data.build_corpus(tok, 2, 64, root, split="held-out")
    train = eagle_data.build_corpus(tok, 2, 64, root)
    assert test.files and all(eagle_data.held_out(f) for f, _ in test.files)
    assert not any(eagle_data.held_out(f) for f, _ in train.files)
    assert test.record()["split"] == "held-out" and train.record()["split"] == "train"
    with pytest.raises(ConfigError, match="split"):
        eagle_data.build_corpus(tok, 2, 64, root, split="test")
