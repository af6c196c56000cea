"""Named checkpoints: atomic save, sha256 check, resumable vs finished, one-line errors."""

import pytest
import torch
from click.testing import CliRunner

from engine import checkpoint
from engine.config import ConfigError
from orchestrator.cli import main


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ORCH_HOME", str(tmp_path))
    return tmp_path


def test_round_trip_and_describe():
    w = {"w": torch.arange(6.0).reshape(2, 3)}
    saved = checkpoint.save("nde-a", "nde", w, {"lr": 1e-3}, step=10, done=True)
    ckpt, state = checkpoint.load("nde-a", "nde")
    assert ckpt == saved and torch.equal(state["w"], w["w"])
    assert checkpoint.describe("nde-a") == {
        "name": "nde-a",
        "kind": "nde",
        "sha256": saved.sha256,
        "config": {"lr": 1e-3},
    }
    assert len(saved.sha256) == 64


def test_unfinished_is_resumable_not_loadable():
    checkpoint.save("bd", "block-drafter", {"step": 3}, {}, step=3, done=False)
    ckpt, state = checkpoint.resumable("bd", "block-drafter")
    assert ckpt.step == 3 and state == {"step": 3}
    with pytest.raises(ConfigError, match="unfinished"):
        checkpoint.load("bd")
    checkpoint.save("bd", "block-drafter", {"step": 9}, {}, step=9, done=True)
    assert checkpoint.resumable("bd", "block-drafter") is None
    assert checkpoint.load("bd")[1] == {"step": 9}


def test_errors_are_one_line(home):
    with pytest.raises(ConfigError, match="no checkpoint 'x'"):
        checkpoint.load("x")
    checkpoint.save("t", "talf", {}, {}, step=1, done=True)
    with pytest.raises(ConfigError, match="is a talf checkpoint, not nde"):
        checkpoint.load("t", "nde")
    with pytest.raises(ConfigError, match="checkpoint name"):
        checkpoint.folder("../etc")
    (home / "checkpoints" / "t" / "state.pt").write_bytes(b"tampered")
    with pytest.raises(ConfigError, match="sha256"):
        checkpoint.load("t")


def test_orch_train_list():
    r = CliRunner().invoke(main, ["train", "list"])
    assert r.exit_code == 0 and "no checkpoints" in r.output
    checkpoint.save("n1", "nde", {}, {}, step=2, done=False)
    r = CliRunner().invoke(main, ["train", "list"])
    assert "n1  nde  unfinished at step 2" in r.output
