"""`orch train eagle-calibration` (the SALF & TALF paper's Fig. 2(b)) end to end on the tiny
target: two briefly trained heads, one table of head x rank, the JSON record equal to the
library's numbers, and bad input rejected with one line before any model loads."""

import json

import pytest
from click.testing import CliRunner

from engine import checkpoint
from orchestrator.cli import main

TOY = "train eagle --target tiny-llama --sequences 8 --seq-len 48 --batch 4 --save-every 500"
CAL = "train eagle-calibration --target tiny-llama --sequences 2 --seq-len 24 --positions 20"


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ORCH_HOME", str(tmp_path))
    return tmp_path


def _run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_two_heads_one_table_and_the_record(tmp_path):
    r = _run(*TOY.split(), "--steps", "20", "--lr", "5e-3", "--name", "a")
    assert r.exit_code == 0, r.output
    r = _run(*TOY.split(), "--steps", "2", "--name", "h", "--loss", "hass", "--init", "eagle:a")
    assert r.exit_code == 0, r.output
    out = tmp_path / "cal.json"
    r = _run(*CAL.split(), "--head", "eagle:a", "--head", "eagle:h", "--ranks", "3",
             "--json", str(out))  # fmt: skip
    assert r.exit_code == 0, r.output
    lines = [ln.split() for ln in r.stdout.splitlines()]
    assert lines[0] == ["head", "rank", "accuracy", "ECE", "count"]
    assert [(ln[0], ln[1], ln[4]) for ln in lines[1:]] == [
        (h, str(n), "20") for h in ("eagle:a", "eagle:h") for n in (1, 2, 3)
    ]
    record = json.loads(out.read_text())
    assert record["target"] == "tiny-llama" and record["corpus"]["split"] == "held-out"
    assert record["positions"] == 20 and record["bins"] == 10 and record["seed"] == 0
    rows = {h["head"]: h["rows"] for h in record["heads"]}
    for ln in lines[1:]:
        row = rows[ln[0]][int(ln[1]) - 1]
        assert f"{row['accuracy']:.3f}" == ln[2] and f"{row['ece']:.3f}" == ln[3]
        assert 0 <= row["accuracy"] <= 1 and 0 <= row["ece"] <= 1

    # the library's numbers, at the same positions (the seed draws them)
    import torch

    from engine.models import load_model
    from engine.runtime.eagle_format import load_head
    from engine.train.eagle_calibration import calibration
    from engine.train.eagle_data import build_corpus, cached_features

    target = load_model("tiny-llama", device="cpu", dtype="float32")
    corpus = build_corpus(target.tokenizer, 2, 24, split="held-out")
    feats, _ = cached_features(target.model, corpus.tokens, lambda *a: None)
    head = load_head("eagle:a", torch.device("cpu"), torch.float32)["model"]
    gen = torch.Generator().manual_seed(0)
    want = calibration(head, target.model, corpus.tokens, feats, 3, 10, 20, gen)
    assert [r.accuracy for r in want] == [r["accuracy"] for r in rows["eagle:a"]]
    assert [r.ece for r in want] == [r["ece"] for r in rows["eagle:a"]]

    # every position (--positions 0), other bins: the same command, no error
    r = _run(*CAL.split()[:-2], "--positions", "0", "--head", "eagle:a", "--ranks", "1",
             "--bins", "5")  # fmt: skip
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[1].split()[-1] == str(2 * 23)

    # a target the head is not for: one line once it is loaded, before any feature
    r = CliRunner().invoke(main, [*CAL.split(), "--head", "eagle:a", "--target", "tiny-neox"])
    assert r.exit_code == 2 and "draft for llama or qwen2 targets, not gpt_neox" in r.output


def test_bad_input_fails_with_one_line_before_any_model_loads(monkeypatch):
    import engine.models
    import engine.train.eagle_calibration

    def no_loading(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(engine.models, "load_model", no_loading)
    monkeypatch.setattr(engine.train.eagle_calibration, "load_model", no_loading)
    checkpoint.save("stub", "eagle", {"weights": {}}, {"target": "tiny-llama"}, step=1, done=True)
    cal = CAL.split()
    cases = [
        (["--head", "eagle:nothing"], "no checkpoint 'nothing'"),
        (["--head", "tiny-llama-draft"], "an EAGLE head"),
        (["--head", "eagle:x", "--ranks", "0"], "--ranks must be >= 1"),
        (["--head", "eagle:x", "--bins", "0"], "--bins must be >= 1"),
        (["--head", "eagle:x", "--positions", "100"], "--positions must be 0 (all) or in 1 .. 46"),
        (["--head", "eagle:x", "--positions", "-1"], "--positions"),
        (["--head", "eagle:x", "--seq-len", "1"], "--seq-len must be >= 2"),
        (["--head", "eagle:x", "--head", "eagle:x"], "each head once"),
        (["--head", "eagle:nothing", "--target", "no-such-model"], "unknown model"),
        (["--head", "eagle:nothing", "--device", "tpu"], "device 'tpu' is not one of"),
        (["--head", "eagle:nothing", "--json", "/no/such/dir/x.json"], "no such folder"),
        (["--head", "eagle:stub", "--target", "eagle:stub"], "the target model, not an EAGLE"),
    ]
    for args, message in cases:
        r = CliRunner().invoke(main, [*cal, *args])
        assert r.exit_code == 2, (args, r.output)
        lines = [ln for ln in r.output.splitlines() if ln.strip()]
        assert lines[-1].startswith("error:") and message in lines[-1], (args, r.output)
        assert "Traceback" not in r.output
    r = CliRunner().invoke(main, cal)
    assert r.exit_code == 2 and "Missing option '--head'" in r.output
