"""Trials record the checkpoints their method parameters name (`checkpoint`, `*_checkpoint`):
name, kind, sha256 and training config in `trials.checkpoints`, shown by `orch export`; a
missing checkpoint is one `error:` line at `orch submit`, before any model loads, with nothing
written to the database."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from engine import checkpoint
from orchestrator.cli import main
from orchestrator.run.preflight import checkpoint_names

SWEEP = """\
name: with-drafter
pairs: [{target: tiny-llama, draft: tiny-llama-draft}]
dataset: {name: humaneval, prompts: 2, prompt_tokens: 24}
max_new_tokens: 10
methods:
  - name: linear
  - name: ddtree
    params: {drafter: block, checkpoint: CKPT, B: 8, L: 4}
"""


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ORCH_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_checkpoint_names():
    params = {"checkpoint": "a", "selector_checkpoint": "b", "other": "c", "x_checkpoint": None}
    assert checkpoint_names(params) == ["a", "b"]


def test_sweep_records_the_checkpoint(home, tmp_path, db_url):
    r = CliRunner().invoke(
        main,
        ["train", "block-drafter", "--name", "bd", "--target", "tiny-llama", "--steps", "2"]
        + ["--holdout", "4", "--sequences", "2", "--seq-len", "24", "--block-size", "4"],
    )
    assert r.exit_code == 0, r.output
    spec = tmp_path / "s.yaml"
    spec.write_text(SWEEP.replace("CKPT", "bd"))
    r = CliRunner().invoke(main, ["submit", str(spec), "--db", db_url, "--executor", "local"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["export", "--db", db_url, "--format", "json"])
    assert r.exit_code == 0, r.output
    rows = {row["method"]: row for row in json.loads(r.stdout)}
    assert rows["ddtree"]["checkpoints"] == [checkpoint.describe("bd")]
    assert rows["ddtree"]["checkpoints"][0]["sha256"] == checkpoint.find("bd").sha256
    assert rows["ddtree"]["checkpoints"][0]["config"]["target"] == "tiny-llama"
    assert rows["linear"]["checkpoints"] is None


def test_missing_checkpoint_fails_submit_in_one_line(home, tmp_path, sqlite_url):
    spec = tmp_path / "s.yaml"
    spec.write_text(SWEEP.replace("CKPT", "nope"))
    r = CliRunner().invoke(main, ["submit", str(spec), "--db", sqlite_url, "--executor", "local"])
    assert r.exit_code == 2, r.output
    assert r.output.startswith("error: no checkpoint 'nope'") and r.output.count("\n") == 1
    assert not (tmp_path / "orch.db").exists()


def test_missing_checkpoint_fails_generate_in_one_line(home):
    r = CliRunner().invoke(
        main,
        ["generate", "--target", "tiny-llama", "--draft", "tiny-llama-draft", "--method"]
        + ["ddtree", "--param", "drafter=block", "--param", "checkpoint=nope", "--prompt", "x"],
    )
    assert r.exit_code == 2 and r.output.startswith("error: no checkpoint 'nope'"), r.output
    assert r.output.count("\n") == 1
