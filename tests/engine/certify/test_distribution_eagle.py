"""engine/certify/distribution.py with an EAGLE head as the draft: a sampling verifier's output
keeps the target's law when the head drafts the trees (engine/draft/eagle.py), and the check
sees a verifier that emits the head's drafts unverified."""

from __future__ import annotations

import functools

import torch

from engine.certify.distribution import (
    ALPHA,
    MIN_POWER,
    V_SMALL,
    Setting,
    check,
    check_pair,
    chi_square,
    draft_two_token_law,
    samples,
    two_token_law,
)
from engine.models import LoadedModel, Pair
from engine.runtime.eagle_head import EagleHead, head_config
from engine.verify import VERIFIERS, Verifier
from engine.verify.common import Accept


@functools.lru_cache(maxsize=None)
def eagle_check_pair() -> Pair:
    """The check's restricted target with a seeded random head drafting through its view."""
    target = check_pair().target
    torch.manual_seed(11)
    head = EagleHead(head_config(target.model.config)).eval()
    with torch.no_grad():  # a sharper head: its law clearly differs from the target's
        head.fc.weight.mul_(4.0)
    draft = LoadedModel("eagle:random-v8", head, target.tokenizer, target.device, target.dtype)
    return Pair(target=target, draft=draft)


def test_a_lossless_verifier_passes_with_the_head():
    r = check(Setting("traversal", "iid", 1.0), eagle_check_pair())
    assert r["support_ok"] and r["p_value"] > ALPHA and r["passed"]
    assert r["power"] >= MIN_POWER and r["informative"]


def first_path(tree, p: torch.Tensor, gen) -> Accept:
    """A broken verifier: the tree's first root-to-leaf path accepted unverified (the draft's
    own tokens), then a bonus token from the target."""
    parents, path, node = tree.parents.tolist(), [], 0
    while node in parents:
        node = parents.index(node)  # the first child
        path.append(node)
    return Accept(path=path, token=int(torch.multinomial(p[node], 1, generator=gen)))


def test_the_heads_law_is_what_its_trees_draw(monkeypatch):
    """draft_two_token_law of the head (one feed of all V children) is the law of the first
    two tokens of its i.i.d. trees (K = 2, L = 2, fed level by level): the broken verifier's
    output fits it, and not the target's."""
    monkeypatch.setitem(VERIFIERS, "broken", Verifier(first_path, ("iid",)))
    pair = eagle_check_pair()
    s = Setting("broken", "iid", 1.0)
    law = draft_two_token_law(pair, s.draft)  # [V^2]
    assert law.shape == (V_SMALL**2,) and abs(float(law.sum()) - 1.0) < 1e-6
    counts = torch.bincount(samples(pair, s, 400), minlength=law.numel())
    assert chi_square(counts, law)[0] > ALPHA
    assert chi_square(counts, two_token_law(pair.target.model, s.warp))[0] < ALPHA


def test_a_verifier_emitting_the_heads_drafts_fails(monkeypatch):
    monkeypatch.setitem(VERIFIERS, "broken", Verifier(first_path, ("iid",)))
    r = check(Setting("broken", "iid", 1.0), eagle_check_pair())
    assert r["p_value"] < ALPHA and not r["passed"]
