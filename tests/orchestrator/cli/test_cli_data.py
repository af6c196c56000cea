"""orchestrator.cli.data: `models list|fetch`, `datasets list|show` through CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from engine import fetch
from orchestrator.cli.data import datasets, models

SHARED = Path("/work/shared/data")
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="needs /work/shared/data")


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ORCH_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def run(group, *args):
    return CliRunner().invoke(group, list(args))


def write_fetched(home: Path, name: str, size: int) -> None:
    folder = home / "models" / name
    folder.mkdir(parents=True)
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (folder / f).write_text("{}")
    (folder / "model.safetensors").write_bytes(b"x")
    (folder / fetch.MANIFEST).write_text(
        json.dumps({"name": name, "dtype": "bfloat16", "size_bytes": size, "parameters": 7})
    )


def test_models_list_table(home):
    write_fetched(home, "qwen2.5-coder-0.5b", 1_271_802_554)
    result = run(models, "list")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["name", "kind", "role", "present", "size", "dtype"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:]}
    assert list(rows) == [
        "tiny-llama",
        "tiny-llama-draft",
        "tiny-neox",
        "tiny-neox-draft",
        "qwen2.5-coder-0.5b",
        "qwen2.5-coder-1.5b",
    ]
    assert rows["tiny-llama"] == ["built-in", "target", "yes", "-", "float32"]
    assert rows["qwen2.5-coder-0.5b"] == ["real", "draft", "yes", "1.27", "GB", "bfloat16"]
    assert rows["qwen2.5-coder-1.5b"] == ["real", "target", "no", "-", "-"]


def test_models_list_json(home):
    result = run(models, "list", "--format", "json")
    assert result.exit_code == 0
    rows = json.loads(result.output)
    assert [r["name"] for r in rows][-2:] == ["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]
    assert rows[-1]["present"] is False
    assert rows[-1]["path"] == str(home / "models" / "qwen2.5-coder-1.5b")


def test_models_fetch_unknown_is_one_line_exit_2(home):
    result = CliRunner().invoke(models, ["fetch", "llama-70b"])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    assert result.output.startswith("error: unknown model 'llama-70b'; fetchable models: ")
    assert "Traceback" not in result.output


def test_models_fetch_builtin_needs_nothing(home):
    result = run(models, "fetch", "tiny-llama")
    assert result.exit_code == 0 and "built in" in result.output
    assert not (home / "models").exists()


def test_models_fetch_progress_and_path(home, monkeypatch):
    def fake_fetch(name, log, keep_gguf):
        log(f"{name}: downloading")
        log(f"{name}: done")
        return home / "models" / name

    monkeypatch.setattr("orchestrator.cli.data.fetch_model", fake_fetch)
    result = CliRunner().invoke(models, ["fetch", "qwen2.5-coder-0.5b"])
    assert result.exit_code == 0
    assert result.stdout == f"{home / 'models' / 'qwen2.5-coder-0.5b'}\n"
    assert result.stderr.splitlines() == [
        "qwen2.5-coder-0.5b: downloading",
        "qwen2.5-coder-0.5b: done",
    ]


def test_models_fetch_failure_is_one_line_exit_1(home, monkeypatch):
    def failing(name, log, keep_gguf):
        raise fetch.FetchError(f"{name}: sha256 mismatch: got aa, expected bb")

    monkeypatch.setattr("orchestrator.cli.data.fetch_model", failing)
    result = CliRunner().invoke(models, ["fetch", "qwen2.5-coder-1.5b"])
    assert result.exit_code == 1
    assert result.stderr == "error: qwen2.5-coder-1.5b: sha256 mismatch: got aa, expected bb\n"


@needs_shared
def test_datasets_list(monkeypatch):
    monkeypatch.setenv("ORCH_DATA_DIR", str(SHARED))
    result = run(datasets, "list")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["name", "file", "present", "items", "categories", "tasks"]
    assert lines[1].split() == ["spec_bench", "spec_bench.jsonl", "yes", "480", "13", "6"]
    assert len(lines) == 9
    rows = json.loads(run(datasets, "list", "--format", "json").output)
    assert {r["name"]: r["items"] for r in rows}["pg19"] == 100


def test_datasets_list_missing_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("ORCH_DATA_DIR", str(tmp_path))
    monkeypatch.setattr("engine.datasets._humaneval_package_file", lambda: None)
    result = run(datasets, "list")
    assert result.exit_code == 0
    assert all(line.split()[2] == "no" for line in result.output.splitlines()[1:])


@needs_shared
def test_datasets_show(monkeypatch):
    monkeypatch.setenv("ORCH_DATA_DIR", str(SHARED))
    result = run(datasets, "show", "spec_bench", "-n", "2", "--format", "json")
    assert result.exit_code == 0
    # the order a sweep uses: round-robin over Spec-Bench's 6 tasks
    assert [r["task"] for r in json.loads(result.output)] == ["mt_bench", "translation"]
    table = run(datasets, "show", "gsm8k", "-n", "1").output.splitlines()
    assert table[1].startswith("gsm8k-test-0000  gsm8k  gsm8k     Janet")


def test_datasets_show_unknown_is_one_line_exit_2():
    result = CliRunner().invoke(datasets, ["show", "alpaca"])
    assert result.exit_code == 2
    assert result.output.startswith("error: unknown dataset 'alpaca'; known datasets: ")
    assert result.output.count("\n") == 1
