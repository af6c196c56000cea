"""`orch train eagle` end to end at toy scale: a named checkpoint, an interrupted run resumed to
the same weights, `orch generate --draft eagle:NAME` greedy-exact, and bad flags rejected with
one line before any model loads."""

import json

import pytest
import torch
from click.testing import CliRunner

from engine import checkpoint
from engine.models import load_model
from orchestrator.cli import main
from orchestrator.run.trial import model_info

TOY = "train eagle --target tiny-llama --sequences 4 --seq-len 32 --batch 2 --save-every 1".split()


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ORCH_HOME", str(tmp_path))
    return tmp_path


def _run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_train_resume_and_generate_with_the_head(home):
    r = _run(*TOY, "--steps", "3", "--name", "a")
    assert r.exit_code == 0, r.output
    a = checkpoint.find("a", "eagle")
    assert a.done and a.step == 3 and f"sha256 {a.sha256}" in r.output
    assert a.config["loss"] == "eagle" and a.config["corpus"]["source"] == "python stdlib"

    assert _run(*TOY, "--steps", "3", "--name", "b", "--stop-after", "2").exit_code == 0
    assert checkpoint.resumable("b", "eagle")[0].step == 2
    r = _run("train", "eagle", "--name", "b", "--resume")
    assert r.exit_code == 0, r.output
    wa, wb = checkpoint.load("a")[1]["weights"], checkpoint.load("b")[1]["weights"]
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert not any(k.startswith(("embed", "lm_head")) for k in wa)  # the target's, not copied

    # what a trial records of the draft: the head alone, and which checkpoint
    info = model_info(load_model("eagle:a"))
    assert info["architecture"] == "eagle-llama" and info["layers"] == 1
    assert info["checkpoint"] == checkpoint.describe("a", "eagle")
    assert info["parameters"] == sum(w.numel() for w in wa.values())

    def tokens(*args):
        r = _run("generate", "--target", "tiny-llama", "--prompt", "def f(x):", "--json",
                 "--max-new-tokens", "16", *args)  # fmt: skip
        assert r.exit_code == 0, r.output
        return json.loads(r.output)["tokens"]

    ref = tokens("--draft", "tiny-llama-draft", "--method", "autoregressive")
    assert tokens("--draft", "eagle:a", "--method", "beam") == ref
    assert tokens("--draft", "eagle:a", "--method", "salf") == ref

    # exported in the public format: the same tensors, the same drafts as eagle:PATH
    r = _run("train", "eagle-export", "--name", "a", "-o", str(home / "pub"), "--with-embedding")
    assert r.exit_code == 0, r.output
    state = torch.load(home / "pub" / "pytorch_model.bin", weights_only=True)
    embed = load_model("tiny-llama").model.get_input_embeddings().weight
    assert torch.equal(state.pop("embed_tokens.weight"), embed)
    assert state.keys() == wa.keys() and all(torch.equal(state[k], wa[k]) for k in wa)
    assert tokens("--draft", f"eagle:{home / 'pub'}", "--method", "beam") == ref
    r = _run("train", "eagle-export", "--name", "nothing", "-o", str(home / "x"))
    assert r.exit_code == 2 and "no checkpoint 'nothing'" in r.output

    # HASS continues the EAGLE-trained head (Sec. 4.1), by the same command
    r = _run(*TOY, "--steps", "1", "--name", "h", "--loss", "hass", "--init", "eagle:a")
    assert r.exit_code == 0, r.output
    assert checkpoint.find("h", "eagle").config["loss"] == "hass"
    r = _run(*TOY, "--steps", "1", "--name", "t", "--loss", "talf", "--init", "eagle:h",
             "--roots", "2")  # fmt: skip
    assert r.exit_code == 0, r.output
    assert checkpoint.find("t", "eagle").config["loss"] == "talf"


def test_bad_flags_fail_with_one_line(monkeypatch):
    import engine.models

    def no_loading(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(engine.models, "load_model", no_loading)
    checkpoint.save("u", "eagle", {"weights": {}}, {"target": "tiny-llama"}, step=1, done=False)
    checkpoint.save("f", "eagle", {"weights": {}}, {"target": "tiny-llama"}, step=1, done=True)
    cases = [
        (["--name", "u"], "pass --resume"),
        (["--name", "f"], "exists"),
        (["--name", "new", "--resume"], "no unfinished eagle checkpoint"),
        (["--name", "x", "--steps", "0"], "steps must be >= 1"),
        (["--name", "x", "--loss", "hass", "--depth", "0"], "--depth"),
        (["--name", "x", "--loss", "talf", "--roots", "0"], "--roots"),
        (["--name", "x", "--target", "no-such-model"], "unknown model"),
        (["--name", "x", "--init", "tiny-llama"], "--init"),
        (["--name", "x", "--init", "eagle:nothing"], "no checkpoint 'nothing'"),
        (["--name", "bad/name"], "checkpoint name"),
        (["--name", "x", "--device", "tpu"], "device 'tpu' is not one of"),
        (["--name", "u", "--resume", "--lr", "0.5"], "--lr"),
    ]
    for args, message in cases:
        r = CliRunner().invoke(main, [*TOY, *args])
        assert r.exit_code == 2, (args, r.output)
        lines = [ln for ln in r.output.splitlines() if ln.strip()]
        assert lines[-1].startswith("error:") and message in lines[-1], (args, r.output)
        assert "Traceback" not in r.output
    r = CliRunner().invoke(main, [*TOY, "--loss", "nope"])
    assert r.exit_code == 2 and "Invalid value for '--loss'" in r.output


SWEEP = """\
name: eagle-pair
pairs: [{target: tiny-llama, draft: "eagle:a"}]
dataset: {name: spec_bench, prompts: 1, prompt_tokens: 16}
max_new_tokens: 8
methods:
  - name: beam
  - name: salf
    grid: {th: [0.0]}
"""


def test_a_sweep_drafts_with_the_head(tmp_path):
    assert _run(*TOY, "--steps", "2", "--name", "a").exit_code == 0
    (tmp_path / "s.yaml").write_text(SWEEP)
    db = f"sqlite:///{tmp_path / 'o.db'}"
    r = _run("submit", str(tmp_path / "s.yaml"), "--db", db, "--executor", "local")
    assert r.exit_code == 0, r.output
    r = _run("export", "--db", db, "--format", "json")
    rows = json.loads(r.stdout)
    assert sorted(row["method"] for row in rows) == ["beam", "salf"]
    assert all(row["draft"] == "eagle:a" and row["tokens_per_iteration"] > 0 for row in rows)
