"""`orch train talf` end to end at toy scale: a checkpoint that round-trips into `ckpt:NAME`,
an interrupted run resumed to the same weights, greedy decoding with the trained draft equal to
autoregressive decoding, and bad flags rejected before any model loads."""

import pytest
import torch
from click.testing import CliRunner

from engine import checkpoint
from engine.decode import generate
from engine.models import load_model, load_pair
from orchestrator.cli import main
from orchestrator.run.trial import model_info

TOY = (
    "train talf --target tiny-llama --draft tiny-llama-draft --steps 3 --roots 3 --prompts 2 "
    "--prompt-tokens 24 --response-tokens 6 --train-layers 1 --save-every 1 --warmup 1 "
    "--lr 1e-3"
).split()


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ORCH_HOME", str(tmp_path))
    return tmp_path


def _run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_train_resume_round_trip_and_greedy_exactness():
    r = _run(*TOY, "--name", "a")
    assert r.exit_code == 0, r.output
    a = checkpoint.find("a", "talf")
    assert (
        a.done and a.step == 3 and a.config["loss"] == "talf" and f"sha256 {a.sha256}" in r.output
    )

    # interrupted after 2 steps, then resumed: the same weights as the run that never stopped
    assert _run(*TOY, "--name", "b", "--stop-after", "2").exit_code == 0
    assert checkpoint.resumable("b", "talf")[0].step == 2
    r = _run("train", "talf", "--name", "b", "--resume")
    assert r.exit_code == 0, r.output
    wa, wb = checkpoint.load("a")[1]["weights"], checkpoint.load("b")[1]["weights"]
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)

    # round trip: ckpt:a is the base draft with the trained tensors, and says which weights
    trained = load_model("ckpt:a")
    base = dict(load_model("tiny-llama-draft").model.named_parameters())
    params = dict(trained.model.named_parameters())
    assert all(torch.equal(params[k], w) for k, w in wa.items())
    assert any(not torch.equal(base[k], w) for k, w in wa.items())  # training changed them
    assert all(torch.equal(p, base[k]) for k, p in params.items() if k not in wa)
    assert model_info(trained)["checkpoint"] == checkpoint.describe("a")

    # greedy decoding with the trained draft is the target's own greedy output
    pair = load_pair("tiny-llama", "ckpt:a")
    ids = pair.target.tokenizer.encode("def add(a, b):\n    return a + b\n\ndef sub(a, b):")
    ref = generate(pair, ids, "autoregressive", 40).tokens
    for method, params_ in (("salf", {"N": 16, "B": 4, "th": 0.0}), ("beam", {"N": 12})):
        out = generate(pair, ids, method, 40, params=params_)
        assert out.tokens == ref, method


def test_distill_baseline_trains_by_the_same_command():
    r = _run(*TOY, "--name", "d", "--loss", "distill", "--steps", "1")
    assert r.exit_code == 0, r.output
    ckpt, state = checkpoint.load("d", "talf")
    assert ckpt.config["loss"] == "distill" and ckpt.step == 1 and "optimizer" not in state


def test_bad_flags_fail_before_any_model_loads(monkeypatch):
    import engine.models

    def no_loading(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(engine.models, "load_model", no_loading)
    checkpoint.save("u", "talf", {"weights": {}}, {"target": "tiny-llama"}, step=1, done=False)
    checkpoint.save("f", "talf", {"weights": {}}, {"target": "tiny-llama"}, step=1, done=True)
    cases = [
        (["--name", "u"], "pass --resume"),
        (["--name", "f"], "exists"),
        (["--name", "new", "--resume"], "no unfinished talf checkpoint"),
        (["--name", "x", "--loss", "hass"], "--loss"),
        (["--name", "x", "--steps", "0"], "steps must be >= 1"),
        (["--name", "x", "--prompts", "100000"], "asked for 100000 prompts"),
        (["--name", "x", "--target", "no-such-model"], "unknown model"),
        (["--name", "bad/name"], "checkpoint name"),
        (["--name", "u", "--resume", "--roots", "5"], "--roots (stored"),
        (["--name", "x", "--train-layers", "99"], "draft tiny-llama-draft has 4 decoder layers"),
    ]
    for args, message in cases:
        r = CliRunner().invoke(main, [*TOY, *args])
        assert r.exit_code == 2, (args, r.output)
        lines = [ln for ln in r.output.splitlines() if ln.strip()]
        assert lines[-1].startswith("error:") and message in lines[-1], (args, r.output)
        assert "Traceback" not in r.output
