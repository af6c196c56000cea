"""Hugging Face ids of the real pair are aliases of their short names: in the registry, the
fetcher's folders and listings, and sweep files (stored, hashed and loaded as the short name).
Nothing here loads or fetches a real model."""

from __future__ import annotations

import json

import pytest

from engine import fetch
from engine.config import ConfigError
from engine.model_names import HUB_IDS, canonical_name
from engine.models import resolve
from orchestrator.spec import load_sweep

ALIASES = [
    ("Qwen/Qwen2.5-Coder-1.5B-Instruct", "qwen2.5-coder-1.5b"),
    ("qwen/qwen2.5-coder-1.5b-instruct", "qwen2.5-coder-1.5b"),
    ("Qwen2.5-Coder-1.5B-Instruct", "qwen2.5-coder-1.5b"),
    ("Qwen/Qwen2.5-Coder-0.5B-Instruct", "qwen2.5-coder-0.5b"),
    ("Qwen2.5-Coder-0.5B-Instruct", "qwen2.5-coder-0.5b"),
]


@pytest.mark.parametrize("alias, short", ALIASES)
def test_hub_ids_map_to_short_names(alias, short):
    assert canonical_name(alias) == short
    assert resolve(alias) == "real"
    assert fetch.model_dir(alias) == fetch.model_dir(short)


@pytest.mark.parametrize("name", ["tiny-llama", "qwen2.5-coder-1.5b", "./some/folder", "none"])
def test_other_names_are_left_alone(name):
    assert canonical_name(name) == name


def test_every_real_model_has_its_hub_id_and_the_fetcher_agrees():
    assert set(HUB_IDS) == set(fetch.REAL_MODELS)
    for name, spec in fetch.REAL_MODELS.items():
        assert HUB_IDS[name] == "Qwen/" + spec.model


def test_a_hub_id_that_is_not_ours_is_a_hub_model(tmp_path, monkeypatch):
    """Any other hub id is resolved as the Hugging Face libraries do (engine/hub.py): offline
    and not in the cache, it is refused in one line (tests/orchestrator/run/test_hub_models.py
    has the rest)."""
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match="model Qwen/Qwen2.5-Coder-7B-Instruct is not in the"):
        resolve("Qwen/Qwen2.5-Coder-7B-Instruct")
    assert resolve("Qwen/Qwen2.5-Coder-7B-Instruct", local=False) == "hub"  # workers decide


def test_fetched_model_is_found_under_its_hub_id(tmp_path, monkeypatch):
    monkeypatch.setenv("ORCH_HOME", str(tmp_path))
    folder = fetch.model_dir("qwen2.5-coder-0.5b")
    folder.mkdir(parents=True)
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json", "m.safetensors"):
        (folder / f).write_text("{}")
    alias = "Qwen/Qwen2.5-Coder-0.5B-Instruct"
    assert not fetch.is_fetched(alias)  # no manifest yet
    (folder / fetch.MANIFEST).write_text(json.dumps({"name": "qwen2.5-coder-0.5b"}))
    assert fetch.is_fetched(alias)
    info = fetch.model_info(alias)
    assert (info["name"], info["present"], info["role"]) == ("qwen2.5-coder-0.5b", True, "draft")
    assert fetch.ensure_fetched(alias) == folder  # present: no download


SWEEP = """\
name: aliases
pairs:
  - {{target: {target}, draft: {draft}}}
dataset: {{name: spec_bench, prompts: 1}}
methods:
  - name: linear
    grid: {{k: [2]}}
"""


def test_a_sweep_naming_hub_ids_stores_and_hashes_the_short_names(tmp_path, monkeypatch):
    monkeypatch.setenv("ORCH_HOME", str(tmp_path / "home"))
    hashes = []
    for i, (t, d) in enumerate(
        [
            ("Qwen/Qwen2.5-Coder-1.5B-Instruct", "Qwen/Qwen2.5-Coder-0.5B-Instruct"),
            ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"),
        ]
    ):
        path = tmp_path / f"s{i}.yaml"
        path.write_text(SWEEP.format(target=t, draft=d))
        sweep, trials = load_sweep(path)
        assert list(sweep.pairs) == [("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b")]
        assert {(x.target, x.draft) for x in trials} == {
            ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b")
        }
        hashes.append(sorted(x.config_hash for x in trials))
    assert hashes[0] == hashes[1]
