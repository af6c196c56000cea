"""run_trial: no Ray, no database; token-weighted aggregates; the per-process pair cache."""

from __future__ import annotations

import pytest

from orchestrator.records import METRICS
from orchestrator.run import trial, version
from tests.orchestrator.orch_helpers import tiny_trial


def test_run_trial_matches_engine_and_aggregates_by_tokens():
    from engine.datasets import encode_prompt, load_prompts
    from engine.decode import generate
    from engine.methods import resolve_method

    cfg = tiny_trial()
    r = trial.run_trial(cfg)
    assert r.config_hash == cfg.config_hash
    assert set(r.metrics) == set(METRICS)
    assert len(r.per_prompt) == 2 and len(r.per_iteration) == 2
    pair, _ = trial.get_pair(cfg.pair_key)
    for i, p in enumerate(load_prompts("spec_bench", 2)):
        ids = encode_prompt(pair.target.tokenizer, p, prompt_tokens=16)
        g = generate(
            pair, ids, resolve_method("linear", {"k": 3}), 12, seed=cfg.seed * 1_000_003 + i
        )
        assert r.per_prompt[i]["tokens"] == g.tokens
        assert r.per_prompt[i]["prompt_tokens"] == len(ids) == 16
    m, pp = r.metrics, r.per_prompt
    assert m["new_tokens"] == sum(p["new_tokens"] for p in pp) == 24
    assert m["throughput"] == pytest.approx(
        m["new_tokens"] / sum(p["total_s"] for p in pp), rel=1e-4
    )
    iters = sum(p["iterations"] for p in pp)
    assert m["tokens_per_iteration"] == pytest.approx(24 / iters)
    drafted = sum(sum(t - 1 for t in it["tree_size"]) for it in r.per_iteration)
    accepted = sum(sum(it["accepted"]) for it in r.per_iteration)
    assert m["acceptance_rate"] == pytest.approx(accepted / drafted)
    assert m["prompts"] == 2 and r.wall_s > 0 and r.host
    assert r.code_version and r.models[0]["name"] == "tiny-llama"


def test_pair_cache_loads_once_and_warmup_does_not_change_tokens():
    trial.clear_cache()
    key = tiny_trial().pair_key
    before = trial.LOADS[key]
    a = trial.run_trial(tiny_trial(method="autoregressive", params={"verifier": "greedy"}))
    b = trial.run_trial(
        tiny_trial(
            method="fixed_tree", params={"depth": 2, "branch": 2, "budget": 8, "verifier": "greedy"}
        ),
        warmup=2,
    )
    assert trial.LOADS[key] == before + 1
    assert a.load_s > 0 and b.load_s == 0
    assert [p["tokens"] for p in a.per_prompt] == [p["tokens"] for p in b.per_prompt]  # lossless
    trial.clear_cache()
    c = trial.run_trial(
        tiny_trial(method="autoregressive", params={"verifier": "greedy"}), warmup=1
    )
    assert c.warmup_s > 0 and trial.LOADS[key] == before + 2
    assert [p["tokens"] for p in a.per_prompt] == [p["tokens"] for p in c.per_prompt]


def test_bad_config_raises_config_error():
    from engine.config import ConfigError

    with pytest.raises(ConfigError):
        trial.run_trial(tiny_trial(params={"k": 0}))


def test_the_code_version_is_read_before_the_engine_runs(monkeypatch):
    """A worker records the code it imported, not the checkout's HEAD when its first result
    comes: here the checkout "moves on" (the git version changes) while the trial decodes."""
    import engine.decode

    head = ["imported"]
    monkeypatch.setattr(version, "git_version", lambda root: head[0])
    generate = engine.decode.generate

    def decode_after_a_commit(*a, **kw):
        head[0] = "moved-on"  # HEAD moves while the trial runs
        return generate(*a, **kw)

    monkeypatch.setattr(engine.decode, "generate", decode_after_a_commit)
    version.code_version.cache_clear()
    try:
        assert trial.run_trial(tiny_trial()).code_version == "imported"
    finally:
        version.code_version.cache_clear()
