"""engine/certify/distribution.py: the stored certificate of sampled trials. A lossless verifier
passes its check at several settings (each tree sampling, top-p, a draft at its own
temperature); a verifier that emits the draft's tokens unverified fails it; settings no check
can answer are refused in one line."""

from __future__ import annotations

import functools

import pytest
import torch

from engine.certify.distribution import ALPHA, MIN_POWER, SEEDS, Setting, check, check_pair
from engine.config import ConfigError
from engine.verify import VERIFIERS, Verifier
from engine.verify.common import Accept


@functools.lru_cache(maxsize=None)
def pair():
    return check_pair()


@pytest.mark.parametrize(
    "setting",
    [
        Setting("traversal", "iid", 1.0),
        Setting("specinfer", "without_replacement", 0.6),
        Setting("nss", "deterministic", 1.0, top_p=0.9),
        Setting("naive", "iid", 1.0, 0.9, draft_temperature=0.6, draft_top_p=1.0),
    ],
    ids=lambda s: f"{s.verifier}-{s.tree_sampling}",
)
def test_a_lossless_verifier_passes(setting):
    r = check(setting, pair())
    assert r["samples"] == SEEDS and r["alpha"] == ALPHA
    assert r["support_ok"] and r["p_value"] > ALPHA and r["passed"]
    assert r["power"] >= MIN_POWER and r["informative"]  # it could have seen a draft-law output


def _accept_first_path(tree, p: torch.Tensor, gen) -> Accept:
    """A broken verifier: the tree's first root-to-leaf path, every token accepted unverified,
    then a bonus token from the target."""
    children: dict[int, list[int]] = {}
    for i, parent in enumerate(tree.parents.tolist()[1:], start=1):
        children.setdefault(parent, []).append(i)
    path, node = [], 0
    while node in children:
        node = children[node][0]
        path.append(node)
    return Accept(path=path, token=int(torch.multinomial(p[node], 1, generator=gen)))


def test_a_verifier_emitting_drafts_fails(monkeypatch):
    monkeypatch.setitem(VERIFIERS, "broken", Verifier(_accept_first_path, ("iid",)))
    r = check(Setting("broken", "iid", 1.0), pair())
    assert r["p_value"] < ALPHA and not r["passed"]


@pytest.mark.parametrize(
    "args, message",
    [
        (("nope", "iid", 1.0), "unknown verifier 'nope'"),
        (("naive", "sideways", 1.0), "unknown tree sampling 'sideways'"),
        (("naive", "iid", 0.0), "needs a temperature > 0"),
        (("spectr", "deterministic", 1.0), "'spectr' is not lossless on deterministic trees"),
        (("naive", "without_replacement", 1.0, 1.0, 0.0), "need a draft temperature > 0"),
    ],
)
def test_settings_no_check_can_answer_are_refused(args, message):
    with pytest.raises(ConfigError, match=message):
        Setting(*args)
