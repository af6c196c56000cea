"""Sequoia's measured acceptance profile in a sweep (orchestrator/acceptance.py): measured once
per pair and sampling by an acceptance trial the driver runs first, stored in
`acceptance_profiles`, attached to every Sequoia trial of its key and reused by later sweeps;
another temperature is another profile; `profile: fixed` keeps the earlier trials' hashes.
Tiny pair, local executor, SQLite."""

from __future__ import annotations

import json
import sqlite3

from click.testing import CliRunner

from engine.drafters.sequoia.build import DEFAULT_PROFILE
from orchestrator.acceptance import ACCEPTANCE, acceptance_trial, key
from orchestrator.cli import main
from orchestrator.records import TrialConfig
from orchestrator.spec import load_sweep, place

SWEEP = """\
name: {name}
pairs:
  - {{target: tiny-llama, draft: tiny-llama-draft}}
dataset: {{name: spec_bench, prompts: 2, prompt_tokens: 16}}
sampling: {{temperature: {temperatures}}}
max_new_tokens: 8
warmup: 0
methods:
  - name: autoregressive
  - name: sequoia
    grid: {{budget: {budgets}, max_depth: [3]}}
"""


def _submit(tmp_path, name: str, temperatures: str, budgets: str, *extra: str):
    path = tmp_path / f"{name}.yaml"
    path.write_text(SWEEP.format(name=name, temperatures=temperatures, budgets=budgets))
    url = f"sqlite:///{tmp_path / 'a.db'}"
    r = CliRunner().invoke(
        main, ["submit", str(path), "--db", url, "--executor", "local", "--no-progress", *extra]
    )
    assert r.exit_code == 0, r.output
    return r.output


def _rows(tmp_path, sql: str) -> list[tuple]:
    db = sqlite3.connect(tmp_path / "a.db")
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def test_measured_once_stored_attached_and_reused(tmp_path):
    out = _submit(tmp_path, "first", "[0.0, 0.6]", "[6, 10]")
    # 2 temperatures x (autoregressive + 2 sequoia + 1 acceptance trial)
    assert "8 trials (8 new" in out and "ran 8 (8 done, 0 failed" in out
    stored = _rows(tmp_path, "select temperature, profile, positions from acceptance_profiles")
    assert sorted(t for t, _, _ in stored) == [0.0, 0.6]
    profiles = {t: json.loads(p) for t, p, _ in stored}
    assert profiles[0.0] != profiles[0.6]  # another temperature, another profile
    assert all(n == 6 * 48 for _, _, n in stored)  # PROTOCOL: 6 held-out prompts x 48 tokens
    used = _rows(
        tmp_path,
        "select json_extract(config, '$.temperature'), json_extract(checkpoints, '$[0].profile')"
        " from trials where method = 'sequoia'",
    )
    assert len(used) == 4
    for t, p in used:  # each Sequoia trial built from its temperature's one measurement
        assert json.loads(p) == profiles[t]
    assert _rows(tmp_path, f"select count(*) from trials where method = '{ACCEPTANCE}'") == [(2,)]

    # greedy: the measured tree's output is the target's own greedy decoding
    tokens = _rows(
        tmp_path,
        "select t.method, r.per_prompt from trials t join results r on r.trial_id = t.id"
        " where json_extract(t.config, '$.temperature') = 0.0",
    )
    outs = {m: [p["tokens"] for p in json.loads(pp)] for m, pp in tokens if m == "autoregressive"}
    for m, pp in tokens:
        assert [p["tokens"] for p in json.loads(pp)] == outs["autoregressive"], m

    # a later sweep of the same pair and sampling: no new measurement, the stored vector
    out = _submit(tmp_path, "second", "[0.0]", "[8]", "--only", "method=sequoia")
    assert "ran 1 (1 done" in out  # the Sequoia trial only: its acceptance trial is done
    assert len(_rows(tmp_path, "select id from acceptance_profiles")) == 2
    (p,) = _rows(
        tmp_path,
        "select json_extract(checkpoints, '$[0].profile') from trials where method = 'sequoia'"
        " and json_extract(config, '$.params.budget') = 8",
    )[0]
    assert json.loads(p) == profiles[0.0]


def test_only_cut_runs_the_acceptance_trial_its_sequoia_trials_need(tmp_path):
    out = _submit(tmp_path, "cut", "[0.6]", "[6]", "--only", "method=sequoia")
    assert "ran 2 (2 done, 0 failed" in out  # the acceptance trial and the Sequoia trial
    assert len(_rows(tmp_path, "select id from acceptance_profiles")) == 1


def test_fixed_profile_keeps_the_earlier_trials_hashes(tmp_path):
    """`profile: fixed` resolves to DEFAULT_PROFILE with no new key in the params: the
    dyspec-scaled Sequoia trial of 2026-11-27 (budget 16, T = 0) has this very hash."""
    path = tmp_path / "d.yaml"
    text = (
        "name: d\npairs:\n  - {target: tiny-llama, draft: tiny-llama-draft}\n"
        "dataset: {name: c4, prompts: 4, prompt_tokens: 64}\n"
        "sampling: {temperature: [0.0], draft_temperature: 0.6}\nmax_new_tokens: 32\n"
        "methods:\n  - name: sequoia\n    params: {budget: 16, profile: fixed}\n"
    )
    path.write_text(text)
    _, trials = load_sweep(path)
    (t,) = place(trials, "cpu")
    assert t.params == {
        "budget": 16,
        "max_depth": 10,
        "profile": DEFAULT_PROFILE,
        "verifier": "greedy",
    }
    stored = TrialConfig.from_dict(
        {
            **t.to_dict(),
            "target": "qwen2.5-coder-1.5b",
            "draft": "qwen2.5-coder-0.5b",
            "params": {**t.params, "profile": list(DEFAULT_PROFILE)},
        }
    )
    assert stored.config_hash == "9f433c965fc8e344cc6d2155c2ffd1d5b76af6d682f3ea357a3b91d2c11627b6"


def test_acceptance_trial_key_matches_its_sequoia_trials():
    base = dict(
        target="t",
        draft="d",
        dataset="c4",
        prompts=4,
        method="sequoia",
        max_new_tokens=8,
        dtype="float32",
        temperature=0.6,
    )
    a = TrialConfig(params={"budget": 6, "profile": "measured"}, **base)
    b = TrialConfig(params={"budget": 64, "profile": "measured", "width": 4}, **base)
    assert key(acceptance_trial(a)) == key(a) and key(a)["width"] == 8
    assert key(acceptance_trial(b)) == key(b) != key(a)
    assert (
        acceptance_trial(a).config_hash
        == acceptance_trial(
            TrialConfig(params={"budget": 128, "profile": "measured"}, **{**base, "prompts": 10})
        ).config_hash
    )  # the same measurement whatever the Sequoia trial's budget or prompts
