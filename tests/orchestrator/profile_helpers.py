"""Tiny curves, stored trials and the hand-computed prediction shared by test_profiles.py and
test_predict_cli.py."""

from __future__ import annotations

from engine.cost_model import CurvePoint, ForwardCurve
from orchestrator.results.profiles import save_curves
from orchestrator.store import Store
from tests.orchestrator.orch_helpers import fake_config, fake_result, record_sweep

CPU, GPU = "Test CPU 9000", "NVIDIA Test GPU"
INFO = {"driver": "", "torch": "2.x", "transformers": "5.x", "triton": "", "cores": 2, "host": "h"}


def _linear(model, device, a, b, dtype="float32", engine="eager"):
    """c(n, C) = a + b n at C = 64 and 256 (no dependence on C)."""
    pts = tuple(CurvePoint(c, n, a + b * n) for c in (64, 256) for n in (1, 2, 4, 8, 16))
    return ForwardCurve(model, device, dtype, engine, pts)


# Per prompt of 4 tokens: autoregressive emits 4 tokens in 4 iterations; linear emits them
# in 2 iterations of a 3-node tree (2 draft forwards: 3 prompt tokens + 1 node, then 1 node).
AR_ITS = {
    "tree_size": [1] * 4,
    "accepted": [0] * 4,
    "emitted": [1] * 4,
    "draft_forwards": [0] * 4,
    "draft_tokens": [0] * 4,
}
LIN_ITS = {
    "tree_size": [3, 3],
    "accepted": [2, 1],
    "emitted": [3, 1],
    "draft_forwards": [2, 2],
    "draft_tokens": [5, 2],
}
ZERO_TIMES = ("draft_s", "target_s", "verify_s", "bookkeeping_s")


def _iters(lists, host=0.0):
    n = len(lists["tree_size"])
    times = {k: [host / 4] * n for k in ZERO_TIMES}
    return {**lists, **times, "draft_forward_s": [0.0] * n, "target_forward_s": [0.0] * n}


# linear k=3 emitting the 4 tokens in one iteration of a 4-node tree (3 draft forwards: 3
# prompt tokens + 1 node, then 1, then 1)
LIN3_ITS = {
    "tree_size": [4],
    "accepted": [3],
    "emitted": [4],
    "draft_forwards": [3],
    "draft_tokens": [6],
}


def _trial(lists, throughput, method="linear", placement=None, **params):
    """A stored trial; `placement` (gpu_id, device_name) where it ran, else a CPU with no
    device name (as trials stored before migration 0007)."""
    cfg = fake_config(method=method, **params)
    res = fake_result(cfg, throughput=throughput)
    gpu_id, device_name = placement or (None, "")
    res = type(res)(
        **{
            **res.__dict__,
            "per_prompt": [{"id": "p0", "prompt_tokens": 4, "tokens": [1, 2, 3, 4]}],
            "per_iteration": [_iters(lists, host=0.1)],
            "gpu_id": gpu_id,
            "device_name": device_name,
        }
    )
    return cfg, res


def _measured(url, *more, placement=None):
    """Autoregressive (10 tok/s) and linear k=2 (15 tok/s) trials (on the CPU, or at
    `placement`), then `more`; the same tiny curves profiled on a CPU and a GPU."""
    store = Store(url)
    trials = [
        _trial(AR_ITS, 10.0, method="autoregressive", placement=placement),
        _trial(LIN_ITS, 15.0, placement=placement, k=2),
    ]
    record_sweep(store, "s", trials + list(more))
    for dev, dt in ((CPU, "float32"), (GPU, "bfloat16")):  # dtype auto resolves per device
        t = _linear("tiny-llama", dev, 1.0, 0.1, dt)
        d = _linear("tiny-llama-draft", dev, 0.2, 0.05, dt)
        save_curves(store, [(t, INFO), (d, INFO)])
    store.close()
    return url


def _expected_speedup(host=0.1):
    """By hand, curves c_t = 1 + 0.1 n, c_d = 0.2 + 0.05 n, `host` s per iteration (the
    stored trials': 0.1)."""
    prefill = 1.0 + 0.1 * 3
    ar = prefill + 4 * (1.1 + host)
    # iteration 1: draft forwards of 3 + 1 and 1 tokens; iteration 2: 1 and 1
    lin = prefill + (0.4 + 0.25) + 1.3 + host + (0.25 + 0.25) + 1.3 + host
    return ar / lin
