"""engine.metrics.METRICS: one list behind a generation's summary and a trial's pooled
metrics; the driver reads it without torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.metrics import METRICS, GenerationStats, IterationStats, pooled_metrics


def _stats(
    new_tokens: int,
    sizes: list[int],
    accepted: list[int],
    total_s: float,
    ttft_s: float = 0.25,
    peak: int = 1000,
) -> GenerationStats:
    its = tuple(
        IterationStats(
            tree_size=n,
            accepted=a,
            emitted=a + 1,
            draft_s=0.01,
            target_s=0.02,
            verify_s=0.003,
            bookkeeping_s=0.004,
            draft_forward_s=0.008,
            target_forward_s=0.015,
        )
        for n, a in zip(sizes, accepted)
    )
    return GenerationStats(
        method="linear",
        new_tokens=new_tokens,
        prefill_s=0.1,
        ttft_s=ttft_s,
        total_s=total_s,
        peak_memory_bytes=peak,
        iterations=its,
    )


def test_summary_is_the_per_generation_metrics():
    g = _stats(9, [4, 4, 4], [3, 2, 1], total_s=1.5)
    s = g.summary()
    assert list(s) == ["method"] + [m.name for m in METRICS if m.per_generation]
    for m in METRICS:
        if m.per_generation:
            assert type(s[m.name]) is m.type, m.name
    assert s["throughput"] == 9 / 1.5 and s["acceptance_rate"] == 6 / 9
    assert s["tokens_per_iteration"] == 3.0 and s["mean_accepted_length"] == 2.0
    assert s["tpot_s"] == pytest.approx((1.5 - 0.25) / 8)
    assert g.to_dict()["per_iteration"]["accepted"] == [3, 2, 1]


def test_a_trial_pools_its_generations():
    a = _stats(9, [4, 4, 4], [3, 2, 1], total_s=1.5, ttft_s=0.2, peak=1000)
    b = _stats(3, [4, 4], [0, 0], total_s=0.5, ttft_s=0.4, peak=3000)
    m = pooled_metrics([a, b], [16, 32])
    assert list(m) == [x.name for x in METRICS]
    assert all(type(m[x.name]) is x.type for x in METRICS)
    assert m["throughput"] == 12 / 2.0  # token-weighted, not the mean of 6 and 6
    assert m["acceptance_rate"] == 6 / 15 and m["tokens_per_iteration"] == 12 / 5
    assert m["ttft_s"] == pytest.approx(0.3) and m["peak_memory_bytes"] == 3000
    assert m["tpot_s"] == pytest.approx((2.0 - 0.6) / (12 - 2))
    assert (m["prompts"], m["prompt_tokens_mean"], m["new_tokens"], m["iterations"]) == (
        2,
        24.0,
        12,
        5,
    )
    one = pooled_metrics([a], [16])
    assert {k: v for k, v in one.items() if k in a.summary()} == {
        k: v for k, v in a.summary().items() if k != "method"
    }


def test_the_metric_list_is_importable_without_torch():
    repo = Path(__file__).resolve().parents[2]
    code = (
        "import sys, engine.metrics, orchestrator.records; "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    env = {**os.environ, "PYTHONPATH": str(repo)}
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=repo, env=env, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr


def test_acceptance_definitions_side_by_side():
    """Three iterations by hand: trees of 5, 4 and 3 nodes (4 + 3 + 2 = 9 drafted), accepted
    2, 0, 2; drafted nodes matching the target's top token 3, 1, 2; the verifier stood on a
    node with children at depths 0..2, 0, 0..1 (tried 3, 1, 2)."""
    from engine.metrics import ACCEPTANCE_DEFINITIONS, acceptance_definitions

    lists = {
        "tree_size": [5, 4, 3],
        "accepted": [2, 0, 2],
        "top_match": [3, 1, 2],
        "tried": [3, 1, 2],
    }
    a = acceptance_definitions([lists])
    assert a["accepted_per_drafted"] == pytest.approx(4 / 9)
    assert a["dynatree_acceptance_rate"] == pytest.approx(6 / 9)
    assert a["dynatree_mean_path_length"] == pytest.approx(4 / 3)
    assert a["ddtree_acceptance_length_histogram"] == [0, 1, 0, 2]  # lengths 1, 3, 3
    assert a["ddtree_mean_acceptance_length"] == pytest.approx(7 / 3)
    # depth 0: tried by 3, accepted by 2; depth 1: tried by 2 (tried > 1), accepted by 2;
    # depth 2: tried by 1, accepted by none (accepted > 2 never)
    assert a["delayed_acceptance_by_depth"] == [
        [2, 3, pytest.approx(2 / 3)],
        [2, 2, 1.0],
        [0, 1, 0.0],
    ]
    assert set(ACCEPTANCE_DEFINITIONS) <= set(a)
    # a trial pools its prompts: counts summed, not rates averaged
    b = {"tree_size": [2], "accepted": [1], "top_match": [1], "tried": [1]}
    pooled = acceptance_definitions([lists, b])
    assert pooled["dynatree_acceptance_rate"] == pytest.approx(7 / 10)
    assert pooled["delayed_acceptance_by_depth"][0] == [3, 4, pytest.approx(3 / 4)]
    # results stored before top_match / tried existed: those two measures are unknown
    old = acceptance_definitions([{"tree_size": [5], "accepted": [2]}])
    assert old["dynatree_acceptance_rate"] is None and old["delayed_acceptance_by_depth"] is None
    assert old["accepted_per_drafted"] == pytest.approx(2 / 4)


def test_generation_counts_top_matches_and_tried_depths(tiny_pair):
    """On real iterations: a linear chain of k at temperature 0 is accepted along nodes that
    all match the target's greedy token, and the verifier tries one depth more than it accepts
    unless it accepts the whole chain; the stored summary carries the side-by-side measures."""
    from engine.decode import generate

    ids = tiny_pair.target.tokenizer.encode("The quick brown fox jumps over the lazy dog. " * 3)
    g = generate(tiny_pair, ids, "linear", 48, params={"k": 4})
    for it in g.stats.iterations:
        chain = it.tree_size - 1
        assert it.tried == min(it.accepted + 1, chain)
        assert it.accepted <= it.top_match <= chain
    assert any(it.accepted > 0 for it in g.stats.iterations)
    d = g.stats.to_dict()
    assert d["acceptance"]["accepted_per_drafted"] == pytest.approx(d["acceptance_rate"])
    assert d["acceptance"]["dynatree_acceptance_rate"] >= d["acceptance_rate"]
    ar = generate(tiny_pair, ids, "autoregressive", 8).stats.iterations
    assert all(it.top_match == 0 and it.tried == 0 for it in ar)
