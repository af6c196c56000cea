"""bench/nde_eval.py at toy scale: NDE against the best fixed action and Traversal on held-out
prompts of the tiny pair, on the engine asked for; refused when the prompts overlap training."""

import json

import pytest
from click.testing import CliRunner

from bench import nde_eval
from orchestrator.cli import main
from tests.orchestrator.orch_helpers import NDE_TOY


@pytest.fixture()
def trained(tmp_path, monkeypatch):
    monkeypatch.setenv("ORCH_HOME", str(tmp_path))
    r = CliRunner().invoke(
        main, [*NDE_TOY, "--name", "toy", "--steps", "4", "--prompt-offset", "2"]
    )
    assert r.exit_code == 0, r.output
    return tmp_path


@pytest.mark.parametrize("engine", ["fast", "graphs"])
def test_three_rows_on_held_out_prompts(trained, engine):
    out = trained / "nde.json"
    argv = ["--checkpoint", "toy", "--prompts", "2", "--prompt-tokens", "12"]
    argv += ["--prompt-offset", "4" if engine == "graphs" else "0"]  # after or before training
    nde_eval.main([*argv, "--max-new-tokens", "8", "--engine", engine, "--out", str(out)])
    record = json.loads(out.read_text())
    assert record["engine"] == engine and record["checkpoint"]["name"] == "toy"
    rows = {r["method"]: r for r in record["rows"]}
    assert set(rows) == {"nde", "best_fixed", "traversal"}
    assert rows["traversal"]["params"]["verifier"] == "traversal"
    fixed = {k: rows["best_fixed"]["params"][k] for k in ("K", "L1", "L2")}
    assert {k: rows["traversal"]["params"][k] for k in fixed} == fixed
    for r in rows.values():
        assert 0 < r["tokens"] <= 2 * 8 and r["iterations"] <= r["tokens"]
        assert r["tokens_per_iteration"] == r["tokens"] / r["iterations"]
    assert len(record["per_prompt"]) == 3 * 2


@pytest.mark.parametrize("prompts, offset", [(3, 0), (1, 3), (5, 1)])
def test_overlapping_prompts_are_refused(trained, prompts, offset):
    """The toy checkpoint trained on prompts 2 and 3."""
    argv = ["--checkpoint", "toy", "--prompts", str(prompts), "--prompt-offset", str(offset)]
    with pytest.raises(SystemExit, match="overlap"):
        nde_eval.main(argv)
