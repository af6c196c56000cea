"""What the greedy tests share: the prompts, the parameter sets of the greedy golden test
(tests/engine/drafters/test_greedy_golden.py), the reference they are all checked against (an
independent cache-free greedy loop) and the per-iteration counters two engine paths must agree
on (tests/engine/iteration/, tests/engine/runtime/)."""

from __future__ import annotations

import dataclasses
import functools

import torch

PROMPTS = ["Hi", "The quick brown fox jumps over", "def fib(n):\n    return n if n < 2 else " * 3]

# method -> parameter sets: the paper defaults plus small variants that stress the budget,
# depth limits and the switches.
# The tiny drafts are nearly uniform (top-1 probability ~0.02), so variants with small
# thresholds are needed to grow non-trivial trees with the threshold-based methods.
DYNATREE_SMALL = {  # thresholds low enough for the tiny drafts' flat distributions
    "depth": 3,
    "branch": 3,
    "threshold": 0.0001,
    "rho_stop": 1e-5,
    "rho_deep": 2e-4,
    "tau_l": 0.018,
    "tau_h": 0.03,
    "N_max": 40,
    "W": 2,
    "accept_high": 0.3,
    "accept_low": 0.1,
}
METHODS = {
    "linear": [{}, {"k": 12, "stop_below": 0.015}],
    "dynatree": [
        {},
        DYNATREE_SMALL,
        {
            "dynamic_breadth": False,
            "dynamic_depth": False,
            "history_adaptation": False,
            "tau": 0.0,
            "D0": 4,
            "N_max": 30,
        },
        {"variant": "ours", **DYNATREE_SMALL},
    ],
    "dyspec": [{}, {"variant": "threshold", "threshold": 0.0005, "budget": 40}],
    "salf": [{}, {"N": 20, "B": 3, "th": 0.0}],
    "beam": [{}, {"N": 5, "top_k": 3, "depth": 3}],
    "ddtree": [{}, {"B": 8, "L": 4}],
    "specinfer": [{}, {"expansion": (3, 1, 2)}],
    "sequoia": [{"profile": "fixed"}, {"budget": 10, "max_depth": 3, "profile": (0.5, 0.3, 0.1)}],
}


@functools.lru_cache(maxsize=None)
def reference(pair, prompt: str, n: int) -> tuple[int, ...]:
    model, eos = pair.target.model, pair.target.tokenizer.eos_token_id
    ids = pair.target.tokenizer.encode(prompt)
    out: list[int] = []
    with torch.inference_mode():
        for _ in range(n):
            logits = model(input_ids=torch.tensor([ids + out])).logits[0, -1]
            out.append(int(logits.argmax()))
            if out[-1] == eos:
                break
    return tuple(out)


def iteration_counters(stats) -> list[dict]:
    """Each iteration's statistics without its timings."""
    return [
        {k: v for k, v in dataclasses.asdict(s).items() if not k.endswith("_s")}
        for s in stats.iterations
    ]


# the Python builder's draft forwards feed only expandable nodes; the static path feeds every
# level at its full width: those two counters differ, every other one must not
PADDED = {"draft_forwards", "draft_tokens"}


def counters_except_padded(stats) -> list[dict]:
    """Each iteration's statistics without its timings and the padded counters."""
    return [
        {k: v for k, v in dataclasses.asdict(s).items() if not k.endswith("_s") and k not in PADDED}
        for s in stats.iterations
    ]


# the iteration counters the fast path reads from its one verification read and the eager
# path from tensors (tests/engine/runtime/test_fast_path.py)
COUNTED = ("tree_size", "accepted", "emitted", "top_match", "tried", "draft_forwards")
