"""A sweep's `profile:` block (orchestrator/spec/parse.py): one profile trial per pair and engine,
run on a worker like any trial, its curves stored in `profiles` with the trial's status; resume
skips it, --rerun replaces its curves; query, compare and export never see it; bad blocks are
one error line; `--scale` profiles at one repeat."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select

from db.models import Profile, Result, Trial
from engine.cost_model import DEFAULT_CONTEXTS, DEFAULT_REPEATS, DEFAULT_SIZES
from engine.curves import device_info
from orchestrator.cli import main
from orchestrator.records import PROFILE
from orchestrator.results.profiles import load_profiles
from orchestrator.run.runner import RunOptions, submit
from orchestrator.spec import load_sweep
from orchestrator.spec.values import SpecError
from orchestrator.store import Store

SWEEP = """\
name: {name}
pairs: [{{target: tiny-llama, draft: tiny-llama-draft}}]
dataset: {{name: spec_bench, prompts: 1, prompt_tokens: 8}}
max_new_tokens: 4
certify: false
methods:
  - name: autoregressive
  - {{name: linear, params: {{k: 2}}}}
"""
PROFILE_BLOCK = "profile: {sizes: [1, 2, 4], contexts: [8], repeats: 1}\n"


def _file(tmp_path, text: str, name: str = "prof"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(SWEEP.format(name=name) + text)
    return path


def _run(path, url, **kw):
    return submit(path, url, RunOptions(executor="local", progress=False), log=lambda _: None, **kw)


def _profiles(store: Store) -> list[tuple]:
    q = select(Profile.id, Profile.device_name, Profile.model, Profile.dtype, Profile.engine)
    return store.transact("profiles", lambda s: s.execute(q.order_by(Profile.model)).all())


def test_sweep_profiles_its_worker_then_resume_skips_and_rerun_replaces(db_url, tmp_path):
    path = _file(tmp_path, PROFILE_BLOCK)
    s = _run(path, db_url)
    assert (s.total, s.done, s.failed) == (3, 3, 0)  # profile + autoregressive + linear
    cpu = device_info("cpu")["device_name"]
    store = Store(db_url)
    rows = _profiles(store)
    assert [r[1:] for r in rows] == [
        (cpu, "tiny-llama", "float32", "eager"),
        (cpu, "tiny-llama-draft", "float32", "eager"),
    ]
    for p in load_profiles(store, cpu):
        assert sorted((pt.context, pt.n) for pt in p["curve"].points) == [(8, 1), (8, 2), (8, 4)]
        assert all(pt.seconds > 0 for pt in p["curve"].points)
    trial = store.transact(
        "trial", lambda s: s.execute(select(Trial).where(Trial.method == PROFILE)).scalar_one()
    )
    assert (trial.status, trial.device_name) == ("done", cpu)
    n_results = store.transact(
        "results", lambda s: s.scalar(select(func.count()).select_from(Result))
    )
    assert n_results == 2  # the profile trial has none

    runner = CliRunner()
    r = runner.invoke(main, ["compare", "--db", db_url, "--predict-on", cpu])
    assert r.exit_code == 0, r.output
    assert "predicted" in r.output and "linear" in r.output
    r = runner.invoke(main, ["export", "--db", db_url, "--format", "json"])
    assert r.exit_code == 0, r.output
    assert sorted(row["method"] for row in json.loads(r.stdout)) == ["autoregressive", "linear"]
    r = runner.invoke(
        main, ["query", "--best-by", "throughput", "--db", db_url, "--format", "json"]
    )
    assert r.exit_code == 0 and PROFILE not in {row["method"] for row in json.loads(r.stdout)}
    r = runner.invoke(main, ["status", "prof", "--db", db_url])
    assert r.exit_code == 0 and "profile tiny-llama/tiny-llama-draft" in r.output
    assert cpu in r.output

    assert _run(path, db_url).ran == 0  # resume: the finished profile trial is not redone
    assert _profiles(store) == rows
    s = _run(path, db_url, rerun=True)  # measured again: the new curves replace the old rows
    assert s.ran == 3
    again = _profiles(store)
    assert [r[1:] for r in again] == [r[1:] for r in rows]
    assert {r[0] for r in again}.isdisjoint(r[0] for r in rows)
    store.close()


def test_profile_trials_identity_and_draft_free_pair(tmp_path):
    base = _file(tmp_path, "engine: [eager, fast]\nprofile: true\n", name="a")
    sweep, trials = load_sweep(base)
    profiles = [t for t in trials if t.method == PROFILE]
    assert trials[: len(profiles)] == profiles  # they run first
    assert [t.engine for t in profiles] == ["eager", "fast"]  # one per pair and engine
    assert profiles[0].params == {
        "sizes": list(DEFAULT_SIZES),
        "contexts": list(DEFAULT_CONTEXTS),
        "repeats": DEFAULT_REPEATS,
    }
    assert sweep.to_dict()["profile"] == profiles[0].params
    _, same = load_sweep(_file(tmp_path, "engine: [eager, fast]\nprofile: true\n", name="a"))
    assert [t.config_hash for t in same] == [t.config_hash for t in trials]  # stable identity
    # duplicates and order do not change a grid; another grid is another trial
    reordered = "profile: {sizes: [4, 1, 2, 2], contexts: '8', repeats: 1}\n"
    one = [t for t in load_sweep(_file(tmp_path, PROFILE_BLOCK, "b"))[1] if t.method == PROFILE]
    two = [t for t in load_sweep(_file(tmp_path, reordered, "c"))[1] if t.method == PROFILE]
    assert one[0].config_hash == two[0].config_hash != profiles[0].config_hash
    plain_sweep, plain = load_sweep(_file(tmp_path, "", "d"))
    assert PROFILE not in {t.method for t in plain} and "profile" not in plain_sweep.to_dict()

    from orchestrator.run.trial import run_trial
    from orchestrator.spec.expand import place

    lone = load_sweep(_file(tmp_path, PROFILE_BLOCK, "e"))[1][0]
    lone = place([lone.__class__(**{**lone.to_dict(), "draft": "none"})], "cpu")[0]
    result = run_trial(lone)  # a model-free pair: the target's curve alone
    assert [p["curve"]["model"] for p in result.profiles] == ["tiny-llama"]
    assert result.metrics == {} and result.per_prompt == []


@pytest.mark.parametrize(
    "block, message",
    [
        ("profile: {sizes: [0, 2]}\n", "profile: sizes must be integers >= 1, got [0, 2]"),
        ("profile: {contexts: [-1]}\n", "profile: contexts must be integers >= 0, got [-1]"),
        ("profile: {sizes: '1,x'}\n", "profile.sizes expects comma-separated integers"),
        ("profile: {sizes: [1, two]}\n", "profile.sizes[1]: expected an integer, got 'two'"),
        ("profile: {repeats: 0}\n", "profile: repeats must be >= 1, got 0"),
        ("profile: {sizes: []}\n", "profile.sizes: empty list"),
        ("profile: {size: [1]}\n", "profile.size: unknown key"),
        ("profile: 3\n", "profile: expected true, false or a mapping"),
        ("profile: {sizes: [8000]}\n", "profile.sizes: must be <= 4097 (limits.max_tree_nodes"),
    ],
)
def test_bad_profile_block_is_one_line_exit_2(block, message, tmp_path):
    path = _file(tmp_path, block)
    r = CliRunner().invoke(
        main,
        ["submit", str(path), "--db", f"sqlite:///{tmp_path / 'new.db'}", "--executor", "local"],
    )
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], r.stderr
    assert not (tmp_path / "new.db").exists()


def test_scaled_sweep_profiles_at_one_repeat(tmp_path):
    scale = "scale: {max_new_tokens: 2}\n"
    block = "profile: {sizes: [1, 2, 4], contexts: [8, 16], repeats: 3}\n"
    _, small = load_sweep(_file(tmp_path, block + scale), scaled=True)
    assert small[0].params == {"sizes": [1, 2, 4], "contexts": [8, 16], "repeats": 1}
    own = "scale: {max_new_tokens: 2, profile: {sizes: [1, 2], repeats: 2}}\n"
    _, small = load_sweep(_file(tmp_path, block + own), scaled=True)
    assert small[0].params == {"sizes": [1, 2], "contexts": [8, 16], "repeats": 2}
    for bad, message in [
        ("scale: {max_new_tokens: 2, profile: {repeats: 4}}\n", "profile.repeats: 4 is more"),
        ("scale: {max_new_tokens: 2, profile: {contexts: [32]}}\n", "profile.contexts: 32 is"),
    ]:
        with pytest.raises(SpecError, match=message):
            load_sweep(_file(tmp_path, block + bad))
    with pytest.raises(SpecError, match="scale.profile: the file has no profile: block"):
        load_sweep(_file(tmp_path, "scale: {max_new_tokens: 2, profile: {repeats: 1}}\n"))
