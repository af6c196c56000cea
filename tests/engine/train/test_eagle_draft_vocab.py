"""A head's draft vocabulary (EAGLE-3's reduced vocabulary, our variant of the EAGLE head):
EAGLE-3's d2t / t2d convention, the restricted LM head's logits against the target's, the
choice of the corpus's most frequent tokens, TALF's labels conditioned on it, the format's
round trip, training with it (and in bfloat16) and decoding with it, greedy-exact, drafting
only its ids, and a sampling verifier's law kept with it as the draft."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from engine.certify.distribution import ALPHA, Setting, check, check_pair
from engine.config import ConfigError
from engine.decode import generate
from engine.models import LoadedModel, Pair, load_pair
from engine.runtime.eagle_format import load_folder, save_folder
from engine.runtime.eagle_head import CachedHead, DraftVocabLMHead, EagleHead, head_config
from engine.train.eagle import TrainConfig, frequent_tokens, restrict_labels, train
from engine.train.talf import Forest
from tests.engine.golden import PROMPTS, reference


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ORCH_HOME", str(tmp_path))
    return tmp_path


def small_head(model, size: int) -> EagleHead:
    torch.manual_seed(0)
    return EagleHead(replace(head_config(model.config), draft_vocab_size=size))


def test_d2t_and_t2d_follow_eagle3(llama_pair):
    """Draft id d is target id d + d2t[d]; t2d marks the drafted target ids."""
    head = small_head(llama_pair.target.model, 4)
    head.set_vocab(torch.tensor([9, 2, 40, 7]))
    assert head.d2t.tolist() == [2 - 0, 7 - 1, 9 - 2, 40 - 3]
    assert head.vocab.tolist() == [2, 7, 9, 40]
    assert head.t2d.nonzero().flatten().tolist() == [2, 7, 9, 40]
    with pytest.raises(ConfigError, match="4 distinct"):
        head.set_vocab(torch.tensor([1, 1, 2, 3]))
    with pytest.raises(ConfigError, match="must be <"):
        head.set_vocab(torch.tensor([1, 2, 3, head.cfg.vocab_size]))
    with pytest.raises(ConfigError, match="draft_vocab_size"):
        replace(head.cfg, draft_vocab_size=head.cfg.vocab_size + 1)


def test_restricted_lm_head_is_the_targets_rows(llama_pair):
    lm_head = llama_pair.target.model.get_output_embeddings()
    vocab = torch.tensor([3, 5, 11, 60])
    x = torch.randn(2, 3, lm_head.weight.shape[1])
    full = lm_head(x)  # [2, 3, V]
    rows = DraftVocabLMHead(lm_head, vocab, full=False)(x)  # [2, 3, 4]
    torch.testing.assert_close(rows, full[..., vocab])
    wide = DraftVocabLMHead(lm_head, vocab, full=True)(x)  # [2, 3, V]
    torch.testing.assert_close(wide[..., vocab], full[..., vocab])
    outside = torch.ones(full.shape[-1], dtype=torch.bool)
    outside[vocab] = False
    assert torch.isneginf(wide[..., outside]).all()
    # its softmax: the target's distribution conditioned on the vocabulary
    p = torch.softmax(full, -1)[..., vocab]
    torch.testing.assert_close(torch.softmax(rows, -1), p / p.sum(-1, keepdim=True))


def test_frequent_tokens_ties_go_to_the_smaller_id():
    tokens = torch.tensor([[5, 5, 5, 2, 2, 9], [9, 7, 7, 1, 3, 3]])  # 5:3, 2/9/7/3: 2, 1: 1
    assert frequent_tokens(tokens, 3, 12).tolist() == [2, 3, 5]
    assert frequent_tokens(tokens, 7, 12).tolist() == [0, 1, 2, 3, 5, 7, 9]  # 0: unseen


def test_talfs_labels_are_conditioned_on_the_vocabulary():
    labels = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.5, 0.0, 0.5, 0.0]])
    forest = Forest(tree=None, rows=torch.tensor([1, 2]), labels=labels, owner=None, roots=(1,))
    out = restrict_labels(forest, torch.tensor([1, 3]))
    torch.testing.assert_close(out.labels, torch.tensor([[1 / 3, 2 / 3], [0.0, 0.0]]))


def test_format_round_trip_keeps_the_vocabulary(llama_pair, tmp_path):
    head = small_head(llama_pair.target.model, 6)
    head.set_vocab(torch.tensor([0, 4, 8, 15, 16, 23]))
    folder = save_folder(head, tmp_path / "h")
    assert json.loads((folder / "config.json").read_text())["draft_vocab_size"] == 6
    back = load_folder(folder)
    assert back.cfg == head.cfg and back.vocab.tolist() == [0, 4, 8, 15, 16, 23]
    state = torch.load(folder / "pytorch_model.bin", weights_only=True)
    assert state["d2t"].tolist() == [0, 3, 6, 12, 12, 18] and int(state["t2d"].sum()) == 6


SMALL_RUN = dict(target="tiny-llama", sequences=16, seq_len=48, batch=4, save_every=500)


@pytest.fixture
def trained(home):
    return train("dv", TrainConfig(steps=200, lr=5e-3, draft_vocab=48, **SMALL_RUN))


def test_trained_head_drafts_its_vocabulary_only_and_is_greedy_exact(trained, llama_pair):
    pair = load_pair("tiny-llama", "eagle:dv")
    head = pair.draft.model
    assert head.cfg.draft_vocab_size == 48
    ids = pair.target.tokenizer.encode(PROMPTS[0])
    cached = CachedHead(head, pair.target.model)
    n = len(ids)
    _, logits = cached.forward(
        torch.tensor(ids),
        torch.randn(n, head.cfg.hidden_size),
        torch.arange(n),
        torch.ones(n, n, dtype=torch.bool).tril(),
    )  # [n, V]
    outside = ~head.t2d
    assert torch.isneginf(logits[:, outside]).all() and torch.isfinite(logits[:, head.t2d]).all()
    accepted = []
    for method, params in [("linear", {"k": 4}), ("beam", {"N": 8, "top_k": 3, "depth": 4})]:
        for prompt in PROMPTS:
            ids = pair.target.tokenizer.encode(prompt)
            g = generate(pair, ids, method, 24, params=params)
            assert tuple(g.tokens) == reference(llama_pair, prompt, 24), (method, prompt)
            accepted += [it.accepted for it in g.stats.iterations]
    assert sum(accepted) >= 10 and max(accepted) >= 2


def test_a_continued_head_keeps_its_vocabulary(trained):
    base = dict(SMALL_RUN, steps=2, init="eagle:dv")
    with pytest.raises(ConfigError, match="another shape"):
        train("dv-hass", TrainConfig(loss="hass", draft_vocab=0, **base))
    ckpt = train("dv-hass", TrainConfig(loss="hass", draft_vocab=48, **base))
    assert ckpt.done
    pair = load_pair("tiny-llama", "eagle:dv-hass")
    assert (
        pair.draft.model.vocab.tolist()
        == load_pair("tiny-llama", "eagle:dv").draft.model.vocab.tolist()
    )


def test_bad_draft_vocab_or_precision_is_one_error():
    with pytest.raises(ConfigError, match="--draft-vocab"):
        TrainConfig(draft_vocab=-1)
    with pytest.raises(ConfigError, match="--precision"):
        TrainConfig(precision="float16")


def test_bfloat16_training_keeps_its_own_features(home):
    a = train("f32", TrainConfig(steps=2, **SMALL_RUN))
    b = train("bf16", TrainConfig(steps=2, precision="bfloat16", **SMALL_RUN))
    assert a.config["features"]["sha256"] != b.config["features"]["sha256"]
    metas = [json.loads(p.read_text()) for p in (home / "eagle_features").glob("*.json")]
    assert sorted(m["dtype"] for m in metas) == ["bfloat16", "float32"]
    assert b.done and load_pair("tiny-llama", "eagle:bf16").draft.model.dtype == torch.float32


def test_a_lossless_verifier_keeps_the_law_with_a_draft_vocabulary():
    """The draft's probability is 0 off its vocabulary: SpecInfer-style traversal still
    emits the target's law (engine/certify/distribution.py's check)."""
    target = check_pair().target
    torch.manual_seed(11)
    head = small_head(target.model, 5).eval()
    head.set_vocab(torch.tensor([0, 2, 3, 5, 7]))
    with torch.no_grad():
        head.fc.weight.mul_(4.0)
    draft = LoadedModel("eagle:random-dv5", head, target.tokenizer, target.device, target.dtype)
    r = check(Setting("traversal", "iid", 1.0), Pair(target=target, draft=draft))
    assert r["support_ok"] and r["p_value"] > ALPHA and r["passed"]
