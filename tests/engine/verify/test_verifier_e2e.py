"""Every verifier end to end through generate() on the tiny pairs.

- Temperature 0: each verifier reproduces autoregressive greedy decoding token for token with
  the i.i.d. and delayed drafters (and NSS / greedy with the deterministic fixed tree).
- Temperature 1.0, top-p 0.9: the first two tokens of generate() with each stochastic verifier
  (method iid, K = 2, L = 2, one seed per sample) against autoregressive sampling and against the
  exact target law (test_sampling_matches_autoregressive states the tests and their power).
- The same with the draft at its own temperature 0.6 and top-p 1 (DySpec Sec. 5.1 drafts at 0.6
  whatever the target's temperature): q is only the proposal, so the output law must not move
  (test_sampling_with_a_draft_at_another_temperature).

The raw tiny models are nearly uniform over 260 tokens and their draft is within 0.05 of the
target in total variation, so frequency tests on them see almost nothing. The sampling tests
therefore run on a small-vocabulary view of the tiny llama pair (`tests.engine.drafters.dist.Restricted`): only the first
8 logits, sharpened, with a fixed logit bias on the draft, so that the target law is far from
uniform and the draft law clearly differs from it while drafts are still often accepted.
That view and the chi-square tests are in tests/engine/verify/e2e_helpers.py.
"""

from __future__ import annotations

import functools

import pytest
import torch

from engine.decode import generate
from engine.models import Pair
from engine.sampling import Warp, warp
from engine.tree import SAMPLING_MODES
from engine.verify import VERIFIERS, Verifier
from tests.engine.verify.e2e_helpers import (
    ALPHA,
    ENGINES,
    FAMILY_ALPHA,
    MIN_POWER,
    STOCHASTIC,
    V_SMALL,
    WARP,
    one_sample,
    small_pair,
    two_sample,
)

PROMPT = [256, 72, 105, 1, 2, 3]  # BOS "Hi" then tokens inside the small vocabulary
SEEDS = 400  # generate() samples per verifier
AR_SEEDS = 1200  # autoregressive reference samples
DRAFT_WARP = Warp(temperature=0.6, top_p=1.0)  # the draft's own settings, apart from WARP


@pytest.mark.parametrize("name", list(VERIFIERS))
def test_greedy_end_to_end(tiny_pair, name):
    prompt = tiny_pair.target.tokenizer.encode("The tiny model says")
    want = generate(tiny_pair, prompt, "autoregressive", 20).tokens
    methods = [("iid", {"K": 3, "L": 4}), ("delayed", {"K": 2, "L1": 2, "L2": 2})]
    if name in ("greedy", "nss"):
        methods.append(("fixed_tree", {"depth": 3, "branch": 2}))
    for method, params in methods:
        got = generate(tiny_pair, prompt, method, 20, params={**params, "verifier": name})
        assert got.tokens == want, (name, method)


@torch.inference_mode()
def two_token_law(model, w: Warp = WARP) -> torch.Tensor:
    """P(y1, y2) of autoregressive sampling with warp w: [V * V] float64 (y1 major)."""
    p1 = warp(model(input_ids=torch.tensor([PROMPT])).logits[0, -1], w).double()  # [V]
    ctx = torch.tensor([PROMPT + [y] for y in range(V_SMALL)])
    p2 = warp(model(input_ids=ctx).logits[:, -1], w).double()  # [V, V] row y1
    return (p1[:, None] * p2).reshape(-1)


@functools.lru_cache(maxsize=None)
def _samples(
    pair: Pair, name: str, engine: str = "eager", draft: Warp | None = None
) -> torch.Tensor:
    """[n] first two generated tokens as y1 * V + y2, one generate() per seed; `draft`: the
    draft's own temperature and top-p (None: WARP's)."""
    if name == "autoregressive":
        seeds, method, params = range(10_000, 10_000 + AR_SEEDS), "autoregressive", {}
    else:
        seeds, method, params = range(SEEDS), "iid", {"K": 2, "L": 2, "verifier": name}
    out = [
        generate(
            pair,
            PROMPT,
            method,
            2,
            temperature=WARP.temperature,
            top_p=WARP.top_p,
            seed=s,
            params=params,
            engine=engine,
            draft_temperature=None if draft is None else draft.temperature,
            draft_top_p=None if draft is None else draft.top_p,
        ).tokens
        for s in seeds
    ]
    return torch.tensor([t[0] * V_SMALL + t[1] for t in out])


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", STOCHASTIC)
def test_sampling_matches_autoregressive(llama_pair, name, engine):
    """Tokens 1 and 2 of generate() (iid tree K = 2, L = 2) at temperature 1, top-p 0.9, on the
    8-token view of the tiny llama pair. Checks, at level ALPHA each (Bonferroni over the
    stochastic verifiers x 2 chi-square tests x the engines):
    - support: every token pair has positive target probability (top-p leaves 32 of the 64
      pairs; an outside pair has probability 0 under autoregressive sampling);
    - two-sample chi-square (homogeneity), verifier (400 seeds) vs autoregressive sampling
      (1200 seeds), on the 64 pairs (pairs expected fewer than 5 times pooled);
    - one-sample chi-square against the exact two-token target law (1 + 8 target forwards).
    Power, from the noncentral chi-square at this level (computed and checked here):
    - against "the two tokens follow the draft law" (what a verifier accepting every draft
      token emits; total variation 0.21): 0.996 two-sample, 0.9999 one-sample (>= 0.99
      required by the test);
    - against a half-half mixture of target and draft law (TV 0.10): 0.10 and 0.24 only.
    Subtle bias is the Monte Carlo contract suite's job (test_verifier_contract.py, 1e5 samples
    per verifier); this test checks the wiring through generate(): warping of draft and target,
    rows of p and q, path and bonus tokens, on both engine paths.
    """
    pair = small_pair(llama_pair)
    law = two_token_law(pair.target.model)
    draft_law = two_token_law(pair.draft.model)
    got, ref = _samples(pair, name, engine), _samples(pair, "autoregressive")
    assert bool((law[got] > 0).all()), "a token pair outside the target's top-p support"
    two, power2 = two_sample(got, ref, law, draft_law)
    one, power1 = one_sample(got, law, draft_law)
    assert min(power1, power2) >= MIN_POWER  # the tests can see a verifier emitting drafts
    assert two > ALPHA, f"{name}: differs from autoregressive sampling (p = {two:.2e})"
    assert one > ALPHA, f"{name}: differs from the exact target law (p = {one:.2e})"


@pytest.mark.parametrize("name", STOCHASTIC)
def test_sampling_with_a_draft_at_another_temperature(llama_pair, name):
    """As test_sampling_matches_autoregressive (eager engine), with the draft drawing its tree at
    DRAFT_WARP (T 0.6, top-p 1) while the target samples at WARP (T 1, top-p 0.9): the verifier
    sees q from the draft's warp and p from the target's, and the output must still follow the
    target's law. Power is computed against the draft's own two-token law at DRAFT_WARP (what a
    verifier accepting every draft token would emit). Family: 2 tests x the stochastic
    verifiers at FAMILY_ALPHA, Bonferroni."""
    alpha = FAMILY_ALPHA / (2 * len(STOCHASTIC))
    pair = small_pair(llama_pair)
    law = two_token_law(pair.target.model)
    draft_law = two_token_law(pair.draft.model, DRAFT_WARP)
    got = _samples(pair, name, "eager", DRAFT_WARP)
    ref = _samples(pair, "autoregressive")
    assert bool((law[got] > 0).all()), "a token pair outside the target's top-p support"
    two, power2 = two_sample(got, ref, law, draft_law)
    one, power1 = one_sample(got, law, draft_law)
    assert min(power1, power2) >= MIN_POWER
    assert two > alpha, f"{name}: differs from autoregressive sampling (p = {two:.2e})"
    assert one > alpha, f"{name}: differs from the exact target law (p = {one:.2e})"


def test_e2e_checks_have_power(llama_pair, monkeypatch):
    """A verifier that emits draft samples (always accepts the first child) fails every check:
    pairs outside the target's top-p set, and both chi-square tests."""
    from engine.verify.common import Accept, layout, sample_index

    def accept_first_child(tree, p, gen):
        lay, node, path = layout(tree), 0, []
        while lay.kids[node]:
            node = lay.kids[node][0]
            path.append(node)
        return Accept(path, sample_index(p[node], float(torch.rand((), generator=gen))))

    monkeypatch.setitem(VERIFIERS, "wrong", Verifier(accept_first_child, SAMPLING_MODES))
    pair = small_pair(llama_pair)
    law = two_token_law(pair.target.model)
    got, ref = _samples(pair, "wrong"), _samples(pair, "autoregressive")
    assert not bool((law[got] > 0).all())
    assert two_sample(got, ref, law)[0] < ALPHA and one_sample(got, law)[0] < ALPHA


def test_certificates_name_only_verifiers_tested_here():
    """engine/certify/teacher_forced.py tells a trial at temperature > 0 whether its verifier's output law is
    tested: by this file, among others."""
    from engine.certify.teacher_forced import DISTRIBUTION_TESTED

    assert set(DISTRIBUTION_TESTED) <= set(STOCHASTIC)
