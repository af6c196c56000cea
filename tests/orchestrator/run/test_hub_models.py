"""Models by Hugging Face id, from a hub cache built offline (tests/hub_cache.py: the tiny models
saved in the layout huggingface_hub writes, HF_HOME pointed at it, HF_HUB_OFFLINE=1).

`orch generate` and a sweep by those ids decode greedy-exact (equal to autoregressive decoding,
and to the built-in tiny model the cache was saved from); each trial stores the commit its
revision resolved to, and a second revision is a second trial. A missing id, a revision the
cache lacks, a gated id and a missing id on a (fake) hub, and a pair with two tokenizers are
each refused in one line before anything is written.
"""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner

from orchestrator.cli import main
from tests.hub_cache import build_cache, fake_hub

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    home = tmp_path_factory.mktemp("hf-home")
    return home, build_cache(home)


@pytest.fixture
def offline(hub, monkeypatch):
    home, commits = hub
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return commits


def _orch(*args: str):
    return CliRunner().invoke(main, list(args))


def _tokens(*args: str) -> list[int]:
    r = _orch("generate", "--prompt", "The cache", "--max-new-tokens", "24", "--json", *args)
    assert r.exit_code == 0, r.output
    return json.loads(r.output.strip().splitlines()[-1])["tokens"]


def test_generate_by_hub_id_is_greedy_exact(offline):
    pair = ("--target", "lab/tiny-llama", "--draft", "lab/tiny-llama-draft")
    tree = _tokens(*pair, "--method", "fixed_tree", "--param", "depth=3", "--param", "branch=2")
    chain = _tokens(*pair, "--method", "linear", "--param", "k=3")
    plain = _tokens("--target", "lab/tiny-llama", "--draft", "none", "--method", "autoregressive")
    built_in = _tokens("--target", "tiny-llama", "--draft", "none", "--method", "autoregressive")
    assert tree == chain == plain == built_in and len(plain) == 24
    v2 = _tokens(*pair, "--target-revision", "v2", "--method", "linear", "--param", "k=3")
    assert v2 == _tokens(
        "--target", "lab/tiny-llama", "--target-revision", "v2", "--draft", "none",
        "--method", "autoregressive",
    )  # fmt: skip


SWEEP = """\
name: {name}
pairs:
  - {{target: {{name: lab/tiny-llama, revision: main}}, draft: lab/tiny-llama-draft}}
  - {{target: {{name: lab/tiny-llama, revision: v2}}, draft: {draft}}}
dataset: {{name: spec_bench, prompts: 2, prompt_tokens: 12}}
max_new_tokens: 12
device: cpu
methods:
  - name: autoregressive
  - {{name: linear, params: {{k: 3}}}}
"""


def test_sweep_records_the_commit_and_a_second_revision_is_a_second_trial(offline, tmp_path):
    spec, db = tmp_path / "hub.yaml", tmp_path / "hub.db"
    spec.write_text(SWEEP.format(name="hub", draft="lab/tiny-llama-draft"))
    r = _orch("submit", str(spec), "--db", f"sqlite:///{db}", "--executor", "local")
    assert r.exit_code == 0, r.output
    con = sqlite3.connect(db)
    rows = con.execute(
        "select t.config, t.status, r.per_prompt from trials t join results r on r.trial_id = t.id"
    ).fetchall()
    assert len(rows) == 4 and {s for _, s, _ in rows} == {"done"}
    by = {}
    for config, _, per_prompt in rows:
        c = json.loads(config)
        assert (
            c["target"] == "lab/tiny-llama"
            and c["draft_revision"] == offline["lab/tiny-llama-draft@main"]
        )
        by[c["target_revision"], c["method"]] = [p["tokens"] for p in json.loads(per_prompt)]
    main_, v2 = offline["lab/tiny-llama@main"], offline["lab/tiny-llama@v2"]
    assert set(by) == {
        (main_, "autoregressive"),
        (main_, "linear"),
        (v2, "autoregressive"),
        (v2, "linear"),
    }
    for rev in (main_, v2):
        assert by[rev, "linear"] == by[rev, "autoregressive"]  # greedy-exact
    stored = json.loads(con.execute("select spec from sweeps").fetchone()[0])
    assert [p.get("target_revision") for p in stored["pairs"]] == ["main", "v2"]
    again = _orch("submit", str(spec), "--db", f"sqlite:///{db}", "--executor", "local")
    assert "(0 new, 4 already done)" in again.output


def _refused(tmp_path, draft="lab/tiny-llama-draft", target="name: lab/tiny-llama, revision: v2"):
    spec, db = tmp_path / "bad.yaml", tmp_path / "bad.db"
    text = SWEEP.format(name="bad", draft=draft).replace(
        "name: lab/tiny-llama, revision: v2", target
    )
    spec.write_text(text)
    r = _orch("submit", str(spec), "--db", f"sqlite:///{db}", "--executor", "local")
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), r.output
    assert not db.exists()  # refused before the database, let alone a trial
    return lines[0]


def test_a_missing_id_a_missing_revision_and_two_tokenizers_are_refused_offline(offline, tmp_path):
    line = _refused(tmp_path, target="name: lab/no-such-model")
    assert "pairs[1].target: model lab/no-such-model is not in the Hugging Face cache" in line
    assert "HF_HUB_OFFLINE is set" in line
    line = _refused(tmp_path, target="name: lab/tiny-llama, revision: v9")
    assert "model lab/tiny-llama@v9 is not in the Hugging Face cache" in line
    line = _refused(tmp_path, draft="lab/other-draft")
    assert (
        "pairs[1]: target lab/tiny-llama and draft lab/other-draft do not share a tokenizer" in line
    )
    assert "eos token differs ('</s>' vs '<eos>')" in line


def test_gated_and_missing_ids_on_the_hub_are_refused(offline, tmp_path, monkeypatch):
    url, server = fake_hub()
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("HF_TOKEN", "hf_secret_never_shown")
    try:
        line = _refused(tmp_path, target="name: lab/gated")
        assert "model lab/gated is gated on the Hugging Face hub" in line
        assert "hf_secret_never_shown" not in line
        line = _refused(tmp_path, target="name: lab/absent")
        assert "model lab/absent not found on the Hugging Face hub" in line
    finally:
        server.shutdown()


def test_a_generate_with_a_missing_id_is_one_line(offline):
    r = _orch("generate", "--target", "lab/absent", "--draft", "none", "--method", "autoregressive",
              "--prompt", "x")  # fmt: skip
    assert r.exit_code == 2 and r.output.count("\n") == 1
    assert "model lab/absent is not in the Hugging Face cache" in r.output
