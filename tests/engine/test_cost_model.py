"""The cost model against answers computed by hand on synthetic linear curves."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from engine import cost_model
from engine.cost_model import GenerationProfile, Iteration


@dataclass(frozen=True)
class Linear:
    """c(n, C) = a + b n + k C: every term of the model is computable by hand."""

    a: float
    b: float
    k: float = 0.0

    def cost(self, n: float, context: float) -> float:
        return self.a + self.b * n + self.k * context if n > 0 else 0.0


def _it(n, acc, emitted, forwards, tokens, host=0.0):
    return Iteration(n, acc, emitted, forwards, tokens, host)


def test_two_iterations_by_hand():
    target, draft = Linear(1.0, 0.1, 0.001), Linear(0.2, 0.05)
    g = GenerationProfile(
        prompt_tokens=11,  # context 10 at the first iteration
        iterations=(_it(5, 2, 3, 2, 14, host=0.5), _it(3, 1, 2, 1, 2, host=0.25)),
    )
    p = cost_model.predict([g], target, draft, host_ar_s=0.125)
    prefill = 1.0 + 0.1 * 10  # c_t(10, 0)
    # iteration 1: C=10; draft: first forward 10 pending + (14-10)/2 = 12, then 2
    it1 = (0.2 + 0.05 * 12) + (0.2 + 0.05 * 2) + (1.0 + 0.5 + 0.01) + 0.5
    # iteration 2: C=13; one draft forward of 2 tokens
    it2 = (0.2 + 0.05 * 2) + (1.0 + 0.3 + 0.013) + 0.25
    assert p.seconds == pytest.approx(prefill + it1 + it2)
    ar = prefill + sum(1.0 + 0.1 + 0.001 * c + 0.125 for c in range(10, 15))
    assert p.ar_seconds == pytest.approx(ar)
    assert p.new_tokens == 5
    assert p.speedup == pytest.approx(ar / (prefill + it1 + it2))
    assert p.time_per_token == pytest.approx((prefill + it1 + it2) / 5)
    assert p.prefill_s == pytest.approx(prefill)
    assert p.host_s == pytest.approx(0.75)


def test_speedup_below_one_when_trees_are_expensive():
    """Compute-bound device (cost proportional to n): verifying 4 nodes for 2 tokens loses."""
    target, draft = Linear(0.0, 1.0), Linear(0.0, 0.5)
    its = tuple(_it(4, 1, 2, 3, 3) for _ in range(5))
    p = cost_model.predict([GenerationProfile(1, its)], target, draft)
    # per iteration: draft 3 x 0.5 + target 4 = 5.5 s for 2 tokens; AR: 1 s per token
    assert p.speedup == pytest.approx(10 / 27.5)
    assert p.speedup < 1


def test_autoregressive_trial_predicts_one():
    target = Linear(0.3, 0.02, 0.0005)
    its = tuple(_it(1, 0, 1, 0, 0, host=0.01) for _ in range(6))
    g = GenerationProfile(20, its)
    h = cost_model.mean_host_per_token([g])
    assert h == pytest.approx(0.01)
    assert cost_model.predict([g], target, None, host_ar_s=h).speedup == pytest.approx(1.0)


def test_pooling_is_token_weighted():
    target, draft = Linear(1.0, 0.0), Linear(0.1, 0.0)
    g1 = GenerationProfile(1, (_it(3, 2, 3, 2, 2),))  # 1 + 0.2 s for 3 tokens
    g2 = GenerationProfile(1, (_it(3, 0, 1, 2, 2),) * 2)  # 2 x 1.2 s for 2 tokens
    p = cost_model.predict([g1, g2], target, draft)
    assert p.speedup == pytest.approx(5 / 3.6)


def test_exact_draft_sizes_override_the_split():
    target, draft = Linear(0.0, 0.0), Linear(1.0, 1.0)
    g = GenerationProfile(1, (_it(2, 1, 2, 2, 4),))
    split = cost_model.predict([g], target, draft)
    exact = cost_model.predict([g], target, draft, draft_sizes=[[[3, 1]]])
    assert split.draft_s == pytest.approx(2 * (1 + 2))  # 4 tokens split 2 + 2
    assert exact.draft_s == pytest.approx((1 + 3) + (1 + 1))


def test_from_per_iteration_reads_stored_lists():
    lists = {
        "tree_size": [5, 1],
        "accepted": [2, 0],
        "emitted": [3, 1],
        "draft_s": [0.5, 0.0],
        "target_s": [0.4, 0.3],
        "verify_s": [0.01, 0.01],
        "bookkeeping_s": [0.02, 0.02],
        "draft_forward_s": [0.45, 0.0],
        "target_forward_s": [0.38, 0.29],
        "draft_forwards": [3, 0],
        "draft_tokens": [7, 0],
    }
    g = cost_model.from_per_iteration(9, lists)
    assert g.prompt_tokens == 9 and g.new_tokens == 4
    assert g.iterations[0] == Iteration(5, 2, 3, 3, 7, pytest.approx(0.05 + 0.02 + 0.03))
    assert g.iterations[1].host_s == pytest.approx(0.01 + 0.03)


def test_draft_forward_sizes():
    it = _it(5, 0, 1, 3, 10)
    assert cost_model.draft_forward_sizes(it, 4) == [6.0, 2.0, 2.0]
    assert cost_model.draft_forward_sizes(it, 0) == pytest.approx([10 / 3] * 3)
    assert cost_model.draft_forward_sizes(_it(1, 0, 1, 0, 0), 4) == []


def test_missing_draft_curve_is_an_error():
    g = GenerationProfile(1, (_it(2, 1, 2, 1, 1),))
    with pytest.raises(ValueError, match="draft"):
        cost_model.predict([g], Linear(1, 0), None)


def test_cost_model_needs_no_torch():
    import subprocess
    import sys

    code = "import sys, engine.cost_model; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
