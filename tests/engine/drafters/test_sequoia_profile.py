"""Sequoia's acceptance profile (Chen et al. 2024 Sec. 3.1): `profile: measured` (the default)
builds only from an attached vector, `fixed` is DEFAULT_PROFILE, an attached vector has the
config's width; measure_profile follows the trial's sampling (the target's and the draft's own
temperature). The dynamic program against brute force: test_properties.py
test_sequoia_dp_is_optimal; the sweep's measurement, storage and reuse:
tests/orchestrator/run/test_acceptance_profiles.py."""

from __future__ import annotations

import pytest
import torch

from engine.drafters.sequoia import build as sequoia
from engine.drafters.sequoia.profile import accepted_rank, measure_profile
from tests.engine.drafters.fakes import fake_builder, random_next_probs, state

GEN = torch.Generator().manual_seed(0)
PROMPTS = [[256, 72, 105], [256, 65]]


def test_measured_builds_only_from_an_attached_vector():
    cfg = sequoia.SequoiaConfig(budget=20, max_depth=4)
    assert cfg.profile == sequoia.MEASURED and cfg.ranks == 8
    with pytest.raises(ValueError, match="no vector attached"):
        sequoia.build(fake_builder(random_next_probs(6, 1)), state(), cfg, GEN)
    attached = sequoia.with_profile(cfg, (0.5, 0.2, 0.1, 0, 0, 0, 0, 0))
    tree = sequoia.build(fake_builder(random_next_probs(6, 1)), state(), attached, GEN)
    shape = sequoia.optimal_shape(attached.profile, 20, 4)
    order = sorted(range(tree.size), key=lambda i: (int(tree.depth[i]), i))
    assert tuple(len(tree.children(i)) for i in order) == shape
    with pytest.raises(ValueError, match="3 ranks, the config's width is 8"):
        sequoia.with_profile(cfg, (0.5, 0.2, 0.1))
    with pytest.raises(ValueError, match="not measured"):
        sequoia.with_profile(attached, attached.profile)


def test_fixed_is_the_default_profile():
    assert sequoia.SequoiaConfig(profile="fixed").profile == sequoia.DEFAULT_PROFILE


def test_profile_follows_the_trials_sampling(llama_pair):
    """A draft equal to the target: greedy, its first child is always the target's token;
    sampled at 0.6 against a greedy target, the first draw is the argmax only sometimes; a
    greedy draft against a target at 1 takes P_t of its top-k exactly (p_1 > p_2). Every
    profile is a sub-probability vector."""
    same = type(llama_pair)(target=llama_pair.target, draft=llama_pair.target)
    greedy = measure_profile(same, PROMPTS, new_tokens=6, width=3)
    assert greedy == (1.0, 0.0, 0.0)
    drafted = measure_profile(
        same, PROMPTS, new_tokens=6, width=3, samples=8, draft_temperature=0.6
    )
    assert drafted != greedy and 0 < drafted[0] < 1 and sum(drafted) <= 1 + 1e-6
    hot = measure_profile(
        same, PROMPTS, new_tokens=6, width=3, temperature=1.0, draft_temperature=0.0
    )
    assert hot[0] > hot[1] and sum(hot) <= 1 + 1e-6
    other = measure_profile(llama_pair, PROMPTS, new_tokens=6, width=3, temperature=1.0, samples=8)
    assert other != hot and sum(other) <= 1 + 1e-6


def test_accepted_rank_by_hand():
    p = torch.tensor([0.0, 1.0, 0.0])
    q = torch.tensor([0.5, 0.3, 0.2])
    assert accepted_rank(p, q, [0, 1, 2], GEN, greedy=True) == 1
    assert accepted_rank(p, q, [0, 2], GEN, greedy=True) is None
    # p = q: the first draw is accepted with probability min(1, p/q) = 1
    assert accepted_rank(q, q, [2, 0, 1], GEN) == 0
