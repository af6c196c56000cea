"""`orch train nde` end to end at toy scale on the tiny pair (CliRunner): data collection,
training, a checkpoint that round-trips and that decoding loads by name, resume from the saved
step, and bad flags as one `error:` line before any model loads."""

import pytest
import torch
from click.testing import CliRunner

from engine import checkpoint
from engine.drafters.delayed import selector as nde
from orchestrator.cli import main
from tests.orchestrator.orch_helpers import NDE_TOY


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ORCH_HOME", str(tmp_path))
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(main, [*NDE_TOY, *args])


def weights(name: str) -> dict:
    return checkpoint.load(name, "nde")[1]["weights"]


def test_train_resume_and_round_trip(home):
    data = str(home / "toy.pt")
    r = run("--name", "straight", "--steps", "6", "--data", data)
    assert r.exit_code == 0, r.output
    assert (home / "toy.pt").exists() and "sha256 " in r.output
    assert "best fixed action (K, L1, L2) = (" in r.output
    ckpt = checkpoint.find("straight", "nde")
    assert ckpt.done and ckpt.step == 6 and f"sha256 {ckpt.sha256}" in r.output
    assert ckpt.config["target"] == "tiny-llama" and ckpt.config["train"]["steps"] == 6

    # round trip: the engine loads it by name and chooses an action of the space
    trained = nde.load("straight")
    assert len(trained.actions) == 2 * 3 * 3 and not trained.net.training
    f = nde.RootFeatures(
        torch.zeros(trained.net.phi1.in_features),
        torch.zeros(trained.net.phi2.in_features),
        torch.zeros(trained.net.phi3.in_features),
        torch.zeros(len(nde.SCALARS), dtype=torch.float64),
    )
    assert nde.choose(trained, f) in trained.actions
    assert checkpoint.describe("straight")["sha256"] == ckpt.sha256

    # interrupted at step 3 (unfinished), then resumed: the same weights as the straight run
    r = run("--name", "split", "--steps", "6", "--data", data, "--stop-after", "3")
    assert r.exit_code == 0, r.output
    assert "unfinished at step 3" in r.output
    assert checkpoint.resumable("split", "nde")[0].step == 3
    r = run("--name", "split", "--steps", "6", "--data", data)
    assert r.exit_code == 2 and "pass --resume" in r.output
    r = run("--name", "split", "--steps", "6", "--data", data, "--resume")
    assert r.exit_code == 0, r.output
    assert checkpoint.find("split", "nde").step == 6
    a, b = weights("straight"), weights("split")
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--k-max", "0"], "--k-max"),
        (["--steps", "0"], "steps"),
        (["--alpha", "2"], "alpha"),
        # nan passed every `<` check: AdamW's traceback, or nan losses, after the data was
        # collected; a negative temperature, top-p outside (0, 1] or no prompt tokens: a
        # traceback once the models had loaded
        (["--lr", "nan"], "lr > 0"),
        (["--lam", "nan"], "lambda >= 0"),
        (["--temperature", "-1"], "--temperature"),
        (["--temperature", "nan"], "--temperature"),
        (["--top-p", "2"], "--top-p"),
        (["--top-p", "0"], "--top-p"),
        (["--prompt-tokens", "0"], "--prompt-tokens"),
        (["--target", "no-such-model"], "no-such-model"),
        (["--dataset", "nope"], "nope"),
        (["--verifier", "greedy"], "not lossless"),
        (["--profile-sizes", "x"], "--profile-sizes"),
        (["--name", "../x"], "checkpoint name"),
        (["--resume"], "no unfinished nde checkpoint"),
    ],
)
def test_bad_flags_fail_before_any_model_loads(home, args, message, monkeypatch):
    import engine.models

    def no_load(*a, **k):
        raise AssertionError("a model loaded")

    monkeypatch.setattr(engine.models, "load_pair", no_load)
    r = run("--steps", "2", *args)
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert lines[-1].startswith("error: ") and message in lines[-1]
    assert "Traceback" not in r.output
    assert not (home / "nde-data").exists() and not (home / "checkpoints").exists()
