"""Losslessness end to end: generate() at temperature 1.0 with every builder and each verifier
it is meant to run with emits token sequences distributed as autoregressive sampling.

World: the tiny llama pair restricted to 8 tokens (tests/engine/drafters/dist.py), so the law
of the first 3 emitted tokens (512 cells) is known exactly by enumeration; 3 tokens span
several iterations whenever a draft is rejected. Each case draws N = 500 sequences with seeds
0..N-1 and runs a chi-square goodness-of-fit test at level 1e-3 (the cases are deterministic;
about 1% family-wise false alarms over 11 cases for correct code). Power is computed, not
assumed: against the alternative "every token follows the draft's law" (what a verifier that
always accepts would emit; total variation 0.22 from the target law here) each case must have
power >= 0.99 (it is 0.9998 at N = 500). A builder with a realistic bug (top-k children
labelled as draws without replacement) is rejected with p < 1e-100.
"""

from __future__ import annotations

import dataclasses
import functools

import pytest
import torch

from engine.decode import generate
from engine.drafters import DRAFTERS, dyspec
from engine.sampling import Warp
from tests.engine.drafters.dist import chi_square, exact_law, restricted_pair

N, TOKENS, V, ALPHA = 500, 3, 8, 1e-3
PROMPT = [1, 4, 2, 6]

# (method, params, verifier): deterministic trees -> nss; without replacement -> specinfer,
# traversal; i.i.d. -> specinfer, spectr, khisti, traversal
CASES = [
    ("dynatree", {}, "nss"),
    ("dyspec", {"budget": 12}, "specinfer"),
    ("dyspec", {"variant": "threshold", "threshold": 0.05}, "traversal"),
    ("salf", {}, "nss"),
    ("beam", {}, "nss"),
    ("ddtree", {"B": 24}, "nss"),
    ("specinfer", {"k": 2, "depth": 3}, "specinfer"),
    ("specinfer", {"k": 2, "depth": 3}, "spectr"),
    ("specinfer", {"k": 2, "depth": 3}, "khisti"),
    ("sequoia", {"budget": 12, "max_depth": 3, "profile": "fixed"}, "specinfer"),
    ("sequoia", {"budget": 12, "max_depth": 3, "profile": "fixed"}, "traversal"),
]


@functools.lru_cache(maxsize=None)
def world():
    from tests.conftest import _pair

    pair = restricted_pair(_pair("llama"), vocab=V)
    law = exact_law(pair.target.model, PROMPT, TOKENS, V).flatten()
    alt = exact_law(pair.draft.model, PROMPT, TOKENS, V).flatten()
    return pair, law, alt


def frequencies(pair, method: str, params: dict, n: int) -> torch.Tensor:
    counts = torch.zeros(V**TOKENS, dtype=torch.long)
    for seed in range(n):
        y = generate(pair, PROMPT, method, TOKENS, temperature=1.0, seed=seed, params=params).tokens
        counts[(y[0] * V + y[1]) * V + y[2]] += 1
    return counts


@pytest.mark.parametrize(
    "method,params,verifier", CASES, ids=[f"{m}-{v}-{i}" for i, (m, _, v) in enumerate(CASES)]
)
def test_emitted_tokens_follow_the_target(method, params, verifier):
    pair, law, alt = world()
    counts = frequencies(pair, method, {**params, "verifier": verifier}, N)
    pvalue, power = chi_square(counts, law, alt, ALPHA)
    assert power >= 0.99, f"the test is too weak here: power {power:.3f}"
    assert pvalue > ALPHA, f"{method}/{verifier}: p = {pvalue:.2e}"


def test_a_broken_builder_is_caught(monkeypatch):
    """Power in practice: DySpec's tree with the draft's top tokens in probability order but
    labelled as draws without replacement (a plausible bug) is far from the target law."""
    pair, law, _ = world()

    def broken(draft, state, cfg, gen):
        dyspec.grow_greedy(draft, dataclasses.replace(state, draft_warp=Warp(0.0)), cfg.budget, gen)
        return draft.tree("without_replacement")

    monkeypatch.setitem(
        DRAFTERS,
        "broken_dyspec",
        dataclasses.replace(DRAFTERS["dyspec"], name="broken_dyspec", build=broken),
    )
    counts = frequencies(pair, "broken_dyspec", {"budget": 4, "verifier": "specinfer"}, 150)
    pvalue, _ = chi_square(counts, law)
    assert pvalue < 1e-30


def test_dyspec_waves_keep_the_target_law(monkeypatch):
    """Algorithm 1 expanded in waves (the padded engines, engine/drafters/dyspec.py): each
    wave draws its nodes' rows together, another random stream with the same law per node."""
    pair, law, alt = world()
    widest = []

    def waves(draft, state, cfg, gen):
        draft.wide = True
        tree = dyspec.build(draft, state, cfg, gen)
        widest.append(max(len(b.nodes) for b in draft._batches))
        return tree

    monkeypatch.setitem(
        DRAFTERS,
        "dyspec_waves",
        dataclasses.replace(DRAFTERS["dyspec"], name="dyspec_waves", build=waves),
    )
    counts = frequencies(pair, "dyspec_waves", {"budget": 12, "verifier": "specinfer"}, N)
    pvalue, power = chi_square(counts, law, alt, ALPHA)
    assert power >= 0.99 and pvalue > ALPHA, f"p = {pvalue:.2e}"
    assert max(widest) > 1  # some forwards expanded several nodes
