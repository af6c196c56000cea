"""The draft's sampling settings apart from the target's (DySpec Sec. 5.1: the draft samples at
temperature 0.6 for target temperatures 0 and 0.6).

- Every drafter draws with the draft's warp: its trees carry the sampling mode of the draft's
  temperature, and a greedy target with a T = 0.6 draft still emits exactly the target's
  greedy tokens (the greedy verifier checks any tree).
- Method resolution pairs the verifier with the trees the draft's temperature makes.
The distribution test with a draft at another temperature is in test_verifier_e2e.py.
"""

from __future__ import annotations

import functools

import pytest
import torch

from engine.config import ConfigError, parse_config
from engine.decode import generate
from engine.draft import DecodeState, DraftModel
from engine.drafters import DRAFTERS
from engine.iteration import iterate
from engine.methods import Method, resolve_method
from engine.runtime.eager import CachedModel
from engine.sampling import Warp, draft_warp
from tests.method_cases import SMALL

PROMPTS = ["Hello world, the tiny model", "def f(x):\n    return x + 1\n" * 2]
NEW = 24
DRAFT_T = 0.6


@functools.lru_cache(maxsize=None)
def greedy_reference(pair, prompt: str) -> tuple[int, ...]:
    return tuple(generate(pair, pair.target.tokenizer.encode(prompt), "autoregressive", NEW).tokens)


def test_draft_warp_defaults_to_the_targets():
    w = Warp(0.8, 0.9)
    assert draft_warp(w) == w
    assert draft_warp(w, 0.6) == Warp(0.6, 0.9)
    assert draft_warp(w, top_p=0.5) == Warp(0.8, 0.5)
    assert draft_warp(Warp(0.0), 0.6, 0.95) == Warp(0.6, 0.95)
    assert DecodeState(prefix_len=0, root_token=1, warp=w, remaining=1).draft_warp == w


@pytest.mark.parametrize("method", list(DRAFTERS))
def test_trees_follow_the_drafts_temperature(llama_pair, method):
    """One iteration with a greedy target and a T = 0.6 draft: the tree is drawn as the
    drafter draws at T > 0 and the greedy verifier takes it."""
    cfg = parse_config(DRAFTERS[method].config, SMALL.get(method, {}))
    w, dw = Warp(0.0), Warp(DRAFT_T)
    target, draft = CachedModel(llama_pair.target.model), DraftModel(llama_pair.draft.model, dw)
    committed = [3, 9, 14, 3]
    target.extend(committed[:-1])
    state = DecodeState(
        prefix_len=3, root_token=3, warp=w, draft_warp=dw, remaining=8, context=committed
    )
    gen = torch.Generator().manual_seed(0)
    step = iterate(target, draft, Method(method, cfg, "greedy"), committed, state, gen)
    declared = DRAFTERS[method].sampling
    if declared is not None:
        assert step.tree.sampling == declared.sampled


@pytest.mark.parametrize("method", list(DRAFTERS))
def test_greedy_target_with_a_sampling_draft_equals_autoregressive(tiny_pair, method):
    params = SMALL.get(method, {})
    for seed, prompt in enumerate(PROMPTS):
        ids = tiny_pair.target.tokenizer.encode(prompt)
        g = generate(
            tiny_pair, ids, method, NEW, params=params, seed=seed, draft_temperature=DRAFT_T
        )
        assert tuple(g.tokens) == greedy_reference(tiny_pair, prompt), (method, prompt)


def test_the_draft_really_samples(llama_pair):
    """i.i.d. rollouts coincide with a greedy draft (a path of L nodes) and branch with a
    sampling one: the draft's temperature, not the target's, reaches the drafter."""
    ids = llama_pair.target.tokenizer.encode(PROMPTS[0])
    params = {"K": 3, "L": 3}
    greedy = generate(llama_pair, ids, "iid", NEW, params=params)
    sampled = generate(llama_pair, ids, "iid", NEW, params=params, draft_temperature=DRAFT_T)
    assert {s.tree_size for s in greedy.stats.iterations} <= {1 + 3, 1 + 2, 1 + 1}
    assert max(s.tree_size for s in sampled.stats.iterations) > 1 + 3
    assert sampled.tokens == greedy.tokens
    # and the other way round: a sampling target with a greedy draft draws the path only
    t_only = generate(llama_pair, ids, "iid", NEW, params=params, temperature=1.0, seed=3)
    g_draft = generate(
        llama_pair, ids, "iid", NEW, params=params, temperature=1.0, seed=3, draft_temperature=0
    )
    assert max(s.tree_size for s in t_only.stats.iterations) > 1 + 3
    assert max(s.tree_size for s in g_draft.stats.iterations) <= 1 + 3


def test_draft_top_p_reaches_the_draft(llama_pair):
    """A draft top-p tiny enough to keep one token makes the sampling draft greedy in effect:
    the same tokens as the greedy draft at the same seed."""
    ids = llama_pair.target.tokenizer.encode(PROMPTS[0])
    kw = dict(params={"K": 3, "L": 3}, temperature=1.0, seed=5)
    nucleus = generate(llama_pair, ids, "iid", NEW, draft_top_p=1e-6, **kw)
    assert max(s.tree_size for s in nucleus.stats.iterations) <= 1 + 3
    full = generate(llama_pair, ids, "iid", NEW, **kw)
    assert max(s.tree_size for s in full.stats.iterations) > 1 + 3


def test_resolution_pairs_the_verifier_with_the_drafts_trees():
    # greedy target, sampling draft: the greedy verifier (exact for any tree)
    assert resolve_method("dyspec", {}, 0.0, draft_temperature=0.6).verifier == "greedy"
    # sampling target, greedy draft: deterministic trees, NSS by default, SpecInfer refused
    assert resolve_method("dyspec", {}, 0.6, draft_temperature=0.0).verifier == "nss"
    with pytest.raises(ConfigError, match="with a draft at temperature 0 .*deterministic"):
        resolve_method("dyspec", {"verifier": "specinfer"}, 0.6, draft_temperature=0.0)
    # both sampling, at different temperatures: the drafter's default
    assert resolve_method("dyspec", {}, 0.6, draft_temperature=0.3).verifier == "specinfer"
    assert resolve_method("dyspec", {}, 0.6).verifier == "specinfer"


def test_bad_draft_settings_are_config_errors(llama_pair):
    ids = [1, 2, 3]
    with pytest.raises(ConfigError, match="temperature must be >= 0"):
        generate(llama_pair, ids, "linear", 2, draft_temperature=-1.0)
    with pytest.raises(ConfigError, match="top_p must be in"):
        generate(llama_pair, ids, "linear", 2, draft_top_p=0.0)
