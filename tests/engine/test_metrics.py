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
