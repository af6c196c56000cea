"""Per-trial losslessness certificates (engine/certify/teacher_forced.py) and the draft's own sampling
settings in a trial (DySpec Sec. 5.1), on the tiny pair: no Ray, no database."""

from __future__ import annotations

import torch

from engine.certify.teacher_forced import (
    DISTRIBUTION_TESTED,
    GREEDY_CHECK,
    SAMPLING_CLAIM,
    greedy_certificate,
    trial_certificate,
)
from engine.verify import VERIFIERS, Accept, Verifier
from engine.verify import greedy as greedy_verifier
from orchestrator.records import TrialConfig
from orchestrator.run import trial
from tests.orchestrator.orch_helpers import tiny_trial


def _tokens(result) -> list[list[int]]:
    return [p["tokens"] for p in result.per_prompt]


def test_greedy_trial_is_certified_lossless():
    r = trial.run_trial(tiny_trial(max_new_tokens=16))
    for p in r.per_prompt:
        c = p["certificate"]
        assert c["check"] == GREEDY_CHECK and c["lossless"] is True
        assert c["first_mismatch"] is None and c["checked"] == len(p["tokens"]) == 16
    t = trial_certificate(r.per_prompt)
    assert t["lossless"] is True and t["prompts"] == 2 and t["checked"] == 32


def test_a_broken_verifier_is_reported_not_lossless(monkeypatch):
    """The greedy verifier swapped for one that accepts the whole first branch of the tree
    whatever the target says: the certificate's first mismatch is exactly where the output
    leaves the target's own greedy decoding (autoregressive trial, same prompts)."""
    ar = trial.run_trial(tiny_trial(method="autoregressive", params={"verifier": "greedy"}))

    def accept_first_branch(tree, p, gen=None):
        parents, node, path = tree.parents.tolist(), 0, []
        while node in parents:
            node = parents.index(node)
            path.append(node)
        return Accept(path=path, token=int(p[node].argmax()))

    broken = Verifier(accept_first_branch, greedy_verifier.MODES, temperature_zero_only=True)
    monkeypatch.setitem(VERIFIERS, "greedy", broken)
    r = trial.run_trial(tiny_trial())
    diverged = 0
    for got, want, p in zip(_tokens(r), _tokens(ar), r.per_prompt):
        c = p["certificate"]
        first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
        assert c["first_mismatch"] == first
        assert c["lossless"] is (first is None)
        if first is not None:
            diverged += 1
            assert c["mismatches"] >= 1 and c["max_margin"] > 0
    assert diverged, "the broken verifier must change some output, or the test shows nothing"
    t = trial_certificate(r.per_prompt)
    assert t["lossless"] is False and t["failed_prompts"] == diverged


def test_greedy_certificate_by_hand(llama_pair):
    """The check itself: the target's greedy continuation passes; changing token 3 fails at 3."""
    from engine.decode import generate

    prompt = llama_pair.target.tokenizer.encode("Hello world")
    out = generate(llama_pair, prompt, "autoregressive", 10).tokens
    model = llama_pair.target.model
    assert greedy_certificate(model, prompt, out)["lossless"] is True
    bad = out[:3] + [(out[3] + 1) % 256] + out[4:]
    c = greedy_certificate(model, prompt, bad)
    assert c["lossless"] is False and c["first_mismatch"] == 3
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([prompt + bad[:3]])).logits[0, -1]
    assert c["max_margin"] >= float(logits.max() - logits[bad[3]]) - 1e-5


def test_sampling_trial_stores_a_claim_not_a_proof():
    r = trial.run_trial(
        tiny_trial(method="iid", params={"K": 2, "L": 2, "verifier": "specinfer"}, temperature=0.8)
    )
    c = trial_certificate(r.per_prompt)
    assert c["check"] == SAMPLING_CLAIM and c["lossless"] is None
    assert c["verifier"] == "specinfer" and c["tree_sampling"] == "iid"
    assert c["verifier_declares_lossless"] is True and c["verifier_distribution_tested"] is True


def test_certify_false_skips_it_and_keeps_hashes():
    cfg = tiny_trial()
    off = tiny_trial(certify=False)
    assert off.config_hash != cfg.config_hash
    r = trial.run_trial(off)
    assert all("certificate" not in p for p in r.per_prompt)
    assert trial_certificate(r.per_prompt) is None
    # the new fields at their defaults leave the stored trials' hashes as they were
    old = {
        k: v
        for k, v in cfg.to_dict().items()
        if k not in ("draft_temperature", "draft_top_p", "certify")
    }
    assert TrialConfig.from_dict(old).config_hash == cfg.config_hash


def test_draft_temperature_in_a_trial():
    """A greedy trial with the draft at 0.6 emits the greedy tokens, is certified, and is a
    trial of its own; a draft setting equal to the target's is the default (one hash)."""
    plain = trial.run_trial(tiny_trial(method="dyspec", params={"budget": 6, "verifier": "greedy"}))
    cfg = tiny_trial(
        method="dyspec", params={"budget": 6, "verifier": "greedy"}, draft_temperature=0.6
    )
    assert cfg.draft_temperature == 0.6 and "draft_T=0.6" in cfg.label()
    drafted = trial.run_trial(cfg)
    assert _tokens(drafted) == _tokens(plain)
    assert trial_certificate(drafted.per_prompt)["lossless"] is True
    assert cfg.config_hash != tiny_trial(method="dyspec", params=cfg.params).config_hash
    same = tiny_trial(temperature=0.6, draft_temperature=0.6, draft_top_p=1)
    assert same.draft_temperature is None and same.draft_top_p is None
    assert same.config_hash == tiny_trial(temperature=0.6).config_hash


def test_greedy_is_never_distribution_tested():
    """Only the stochastic verifiers' laws are tested; each test file holding
    DISTRIBUTION_TESTED to its own list: test_verifier_contract.py, test_verifier_e2e.py."""
    assert "greedy" not in DISTRIBUTION_TESTED
    assert set(DISTRIBUTION_TESTED) <= set(VERIFIERS)
