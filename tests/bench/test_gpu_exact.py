"""python -m bench.gpu.exact on the CPU: every engine's greedy output against autoregressive
decoding, the learned components' toy checkpoints, and our own forward (ENGINE+lean)."""

import json

from bench.gpu import exact


def test_gpu_exact_checks_each_engine_against_autoregressive(tmp_path, capsys):
    out = tmp_path / "exact.json"
    argv = ["--device", "cpu", "--families", "llama", "--engines", "eager,fast"]
    argv += ["--methods", "linear,dynatree", "--new-tokens", "8", "--prompts", "1"]
    assert exact.main([*argv, "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["method"], r["engine"]) for r in rows] == [
        ("linear", "eager"),
        ("dynatree", "eager"),
        ("linear", "fast"),
        ("dynatree", "fast"),
    ]
    assert all(r["equal"] and r["reads_per_iteration"] >= 1 for r in rows)
    assert "4/4 cases equal to autoregressive" in capsys.readouterr().out


def test_gpu_exact_learned_cases_train_toy_checkpoints_in_a_new_home(tmp_path, monkeypatch):
    monkeypatch.setenv("ORCH_HOME", str(tmp_path / "user_home"))
    out = tmp_path / "exact.json"
    argv = ["--device", "cpu", "--families", "neox", "--engines", "graphs", "--learned"]
    argv += ["--methods", "autoregressive", "--new-tokens", "8", "--prompts", "1"]
    assert exact.main([*argv, "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["method"] for r in rows] == ["autoregressive", "delayed+nde", "ddtree+block"]
    assert all(r["equal"] for r in rows)
    assert not (tmp_path / "user_home").exists()  # the toy checkpoints went elsewhere


def test_gpu_exact_runs_every_method_on_the_lean_forward(tmp_path, capsys):
    out = tmp_path / "exact.json"
    argv = ["--device", "cpu", "--families", "llama", "--engines", "fast+lean,graphs+lean"]
    argv += ["--methods", "autoregressive,dynatree,ddtree", "--new-tokens", "12", "--prompts", "1"]
    assert exact.main([*argv, "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert {r["engine"] for r in rows} == {"fast+lean", "graphs+lean"} and len(rows) == 6
    assert all(r["equal"] for r in rows)
