"""Training the EAGLE head (engine/train/eagle*.py): EAGLE's loss on a hand-computed case and
teacher-forced rows against a per-step loop, the stdlib corpus's split and overlap check, the
feature cache, a resumed run equal to an uninterrupted one, and greedy exactness with a
briefly trained head that drafts accepted tokens."""

from __future__ import annotations

import json
import math

import pytest
import torch

from engine import checkpoint
from engine.config import ConfigError
from engine.datasets import load_prompts
from engine.decode import generate
from engine.models import load_pair
from engine.runtime.eagle_head import EagleHead, head_config
from engine.train import eagle_data
from engine.train.eagle import TrainConfig, train
from engine.train.eagle_loss import eagle_loss, eagle_objective, eagle_rows
from tests.engine.golden import PROMPTS, reference


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ORCH_HOME", str(tmp_path))
    return tmp_path


def test_eagle_objective_by_hand():
    """H = V = 2, the LM head the identity: logits are the features. Target f = (0, 0): p =
    (1/2, 1/2); head f(d) = (0.5, 2.5): SmoothL1 (0.125 + 2.0) / 2, cross-entropy
    (log(1 + e^2) + log(1 + e^-2)) / 2; L = 1 * reg + 10 * cls."""
    lm_head = torch.nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        lm_head.weight.copy_(torch.eye(2))
    out, feats = torch.tensor([[0.5, 2.5]]), torch.zeros(1, 2)
    parts = eagle_objective(out, feats, lm_head)
    reg = (0.5 * 0.5**2 + (2.5 - 0.5)) / 2
    cls = (math.log(1 + math.e**2) + math.log(1 + math.e**-2)) / 2
    assert parts.reg.item() == pytest.approx(reg)
    assert parts.cls.item() == pytest.approx(cls)
    assert parts.loss.item() == pytest.approx(reg + 10 * cls)
    # weights: a step of weight 0 does not count
    two = eagle_objective(
        torch.cat([out, feats]), torch.cat([feats, feats]), lm_head, weight=torch.tensor([1, 0])
    )
    assert two.loss.item() == pytest.approx(parts.loss.item())


def test_teacher_forced_rows_are_a_per_step_loop(llama_pair):
    """Row j of eagle_rows is the head over rows (x_{i+1}, f_i), i <= j, run from scratch;
    eagle_loss is the objective of those rows against f_{j+1}."""
    model = llama_pair.target.model
    torch.manual_seed(0)
    head = EagleHead(head_config(model.config))
    embed, lm_head = model.get_input_embeddings(), model.get_output_embeddings()
    gen = torch.Generator().manual_seed(3)
    tokens = torch.randint(0, 260, (2, 6), generator=gen)
    feats = torch.randn(2, 6, 64, generator=gen)
    with torch.no_grad():
        rows = eagle_rows(head, embed, tokens, feats)  # [2, 5, 64]
        for b in range(2):
            for j in range(5):
                e = embed(tokens[b, 1 : j + 2])[None]
                out, _ = head(e, feats[b, : j + 1][None], torch.arange(j + 1)[None])
                torch.testing.assert_close(rows[b, j], out[0, -1], atol=1e-5, rtol=0)
        want = eagle_objective(rows, feats[:, 1:], lm_head)
        got = eagle_loss(head, embed, lm_head, tokens, feats)
    assert got.loss.item() == pytest.approx(want.loss.item(), rel=1e-6)


def test_corpus_split_is_recorded_and_leaves_out_evaluation_prompts(tmp_path, llama_pair):
    prompt = next(p.text for p in load_prompts("humaneval") if len(p.text) > 60)
    root = tmp_path / "lib"
    names = sorted(f"m{i:02d}.py" for i in range(40))
    first = next(n for n in names if not eagle_data.held_out(n))  # the first file it would use
    for i, n in enumerate(names):
        (root / ("test" if i == 5 else "")).mkdir(parents=True, exist_ok=True)
        path = root / ("test" if i == 5 else "") / n
        path.write_text(f"# module {i}\nx = {i}\n" * 20 + (prompt if n == first else ""))
    files = eagle_data.source_files(root)
    assert "test/m05.py" not in files and len(files) == 39  # the test suites are left out
    tok = llama_pair.target.tokenizer
    corpus = eagle_data.build_corpus(tok, 4, 64, root)
    used = [f for f, _ in corpus.files]
    assert corpus.dropped == (first,) and first not in used
    assert not any(eagle_data.held_out(f) for f in used)
    assert any(eagle_data.held_out(f) for f in files)  # the split holds some out
    assert corpus.tokens.shape == (4, 64)
    again = eagle_data.build_corpus(tok, 4, 64, root)
    assert again.sha256 == corpus.sha256 and torch.equal(again.tokens, corpus.tokens)
    (root / used[0]).write_text("changed = True\n" * 30)
    assert eagle_data.build_corpus(tok, 4, 64, root).sha256 != corpus.sha256
    with pytest.raises(ConfigError, match="needs 64000"):
        eagle_data.build_corpus(tok, 1000, 64, root)


def test_features_are_computed_once_and_checked(llama_pair, monkeypatch):
    model = llama_pair.target.model
    tokens = torch.randint(0, 260, (2, 16), generator=torch.Generator().manual_seed(1))
    calls = []
    compute = eagle_data._compute
    monkeypatch.setattr(eagle_data, "_compute", lambda *a: calls.append(1) or compute(*a))
    feats, meta = eagle_data.cached_features(model, tokens, lambda *a: None)
    again, meta2 = eagle_data.cached_features(model, tokens, lambda *a: None)
    assert len(calls) == 1 and torch.equal(feats, again) and meta["sha256"] == meta2["sha256"]
    with torch.no_grad():
        out = model(input_ids=tokens[:1], output_hidden_states=True)
    torch.testing.assert_close(feats[0], out.hidden_states[-1][0])
    torch.testing.assert_close(model.lm_head(feats[0]), out.logits[0])  # the LM head's input
    path = eagle_data.features_dir() / (meta["path"].rsplit("/", 1)[1])
    torch.save(torch.zeros(1), path)
    with pytest.raises(ConfigError, match="sha256"):
        eagle_data.cached_features(model, tokens, lambda *a: None)
    assert json.loads(path.with_suffix(".json").read_text())["shape"] == [2, 16, 64]


SMALL_RUN = dict(target="tiny-llama", sequences=8, seq_len=48, batch=4, save_every=2)


def test_resumed_run_equals_an_uninterrupted_one():
    a = train("a", TrainConfig(steps=4, **SMALL_RUN))
    assert a.done and a.step == 4 and a.config["corpus"]["files"] >= 1
    b = train("b", TrainConfig(steps=4, **SMALL_RUN), stop_after=3)
    assert not b.done and b.step == 3
    with pytest.raises(ConfigError, match="pass --resume"):
        train("b", TrainConfig(steps=4, **SMALL_RUN))
    with pytest.raises(ConfigError, match="differ"):
        train("b", TrainConfig(steps=4, **{**SMALL_RUN, "lr": 1e-4}), resume=True)
    assert train("b", TrainConfig(steps=4, **SMALL_RUN), resume=True).done
    wa, wb = checkpoint.load("a")[1]["weights"], checkpoint.load("b")[1]["weights"]
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_trained_head_is_greedy_exact_and_drafts_accepted_tokens(trained, llama_pair):
    pair = load_pair("tiny-llama", "eagle:trained")
    accepted = []  # per iteration, over the methods and prompts
    for method, params in [
        ("linear", {"k": 4}),
        ("beam", {"N": 8, "top_k": 3, "depth": 4}),
        ("salf", {}),
        ("salf", {"N": 16, "B": 4, "th": 0.0}),  # SpecExec's optimal tree
        ("dynatree", {"depth": 3, "branch": 2, "N_max": 12}),
    ]:
        for j, prompt in enumerate(PROMPTS):
            n = 30 if j != 1 else 19
            ids = pair.target.tokenizer.encode(prompt)
            g = generate(pair, ids, method, n, params=params)
            assert tuple(g.tokens) == reference(llama_pair, prompt, n), (method, prompt)
            accepted += [it.accepted for it in g.stats.iterations]
    # the trained head's drafts are accepted, paths of several nodes too (re-fed next time)
    assert sum(accepted) >= 20 and max(accepted) >= 2


@pytest.fixture
def trained(home):
    """A head trained briefly with EAGLE's loss (a few seconds on one CPU core)."""
    cfg = TrainConfig(steps=200, lr=5e-3, **{**SMALL_RUN, "sequences": 16, "save_every": 500})
    return train("trained", cfg)
