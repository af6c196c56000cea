"""Prompt lookup at temperature > 0 through generate(): with NSS (the only stochastic verifier
its deterministic trees admit, engine/drafters/prompt_lookup.py) the first two tokens follow
the target's exact law; a verifier that takes the looked-up tokens as they are does not.

Same set-up and statistics as tests/engine/verify/test_verifier_e2e.py (the 8-token view of
the tiny llama pair, chi-square goodness of fit with its power computed: e2e_helpers.py), with a
prompt that repeats itself so that every first iteration drafts a lookup tree.
"""

from __future__ import annotations

import dataclasses
import functools

import pytest
import torch

from engine.decode import generate
from engine.sampling import warp
from engine.tree import SAMPLING_MODES
from engine.verify import VERIFIERS, Verifier
from tests.engine.verify.e2e_helpers import MIN_POWER, WARP, one_sample, small_pair

V = 8
PROMPT = [256, 1, 2, 3, 1, 2, 3, 1, 2]  # suffix (1, 2) recurs: lookup drafts 3, 1, 2, ...
SEEDS = 400
ALPHA = 1e-3 / 3  # three methods, one test each
METHODS = [
    ("lookup", {"min_ngram": 1, "k": 4}),
    ("lookup_tree", {"min_ngram": 1, "k": 3, "branches": 3, "budget": 8}),
    ("lookup_hybrid", {"min_ngram": 1, "k": 3, "N": 8, "lookup_budget": 4}),
]


@torch.inference_mode()
def two_token_law(model) -> torch.Tensor:
    """P(y1, y2) of autoregressive sampling with WARP after PROMPT: [V * V] float64."""
    p1 = warp(model(input_ids=torch.tensor([PROMPT])).logits[0, -1], WARP).double()  # [V]
    ctx = torch.tensor([PROMPT + [y] for y in range(V)])
    p2 = warp(model(input_ids=ctx).logits[:, -1], WARP).double()  # [V, V] row y1
    return (p1[:, None] * p2).reshape(-1)


@functools.lru_cache(maxsize=None)
def samples(pair, method: str, params: tuple, verifier: str) -> tuple[torch.Tensor, int]:
    """[SEEDS] first two tokens as y1 * V + y2, and the number of drafted nodes."""
    out, drafted = [], 0
    for s in range(SEEDS):
        g = generate(
            pair,
            PROMPT,
            method,
            2,
            temperature=WARP.temperature,
            top_p=WARP.top_p,
            seed=s,
            params={**dict(params), "verifier": verifier},
        )
        out.append(g.tokens[0] * V + g.tokens[1])
        drafted += sum(it.tree_size - 1 for it in g.stats.iterations)
    return torch.tensor(out), drafted


@pytest.mark.parametrize("method,params", METHODS, ids=[m for m, _ in METHODS])
def test_nss_with_lookup_trees_samples_the_target_law(llama_pair, method, params):
    pair = small_pair(llama_pair)
    if method != "lookup_hybrid":  # model-free: no draft model at all
        pair = dataclasses.replace(pair, draft=None)
    law = two_token_law(pair.target.model)
    got, drafted = samples(pair, method, tuple(params.items()), "nss")
    assert drafted >= SEEDS  # every generation drafted from the lookup
    assert bool((law[got] > 0).all()), "a token pair outside the target's top-p support"
    # power against "emit the looked-up tokens (3, 1) as they are"
    greedy_copy = torch.zeros_like(law)
    greedy_copy[3 * V + 1] = 1.0
    pvalue, power = one_sample(got, law, 0.5 * law + 0.5 * greedy_copy)
    assert power >= MIN_POWER
    assert pvalue > ALPHA, f"{method}: differs from the target law (p = {pvalue:.2e})"


def test_a_verifier_that_trusts_the_lookup_fails(llama_pair, monkeypatch):
    """Accepting the looked-up tokens without checking them is caught by the same test."""
    from engine.verify.common import Accept, layout, sample_index

    def accept_first_child(tree, p, gen):
        lay, node, path = layout(tree), 0, []
        while lay.kids[node]:
            node = lay.kids[node][0]
            path.append(node)
        return Accept(path, sample_index(p[node], float(torch.rand((), generator=gen))))

    monkeypatch.setitem(VERIFIERS, "trusting", Verifier(accept_first_child, SAMPLING_MODES))
    pair = dataclasses.replace(small_pair(llama_pair), draft=None)
    law = two_token_law(pair.target.model)
    got, _ = samples(pair, "lookup", (("min_ngram", 1), ("k", 4)), "trusting")
    assert one_sample(got, law)[0] < ALPHA
