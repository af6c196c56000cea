"""A per-trial losslessness certificate: what each trial can check about its own output.

- Temperature 0 (`greedy_certificate`, check "greedy_teacher_forced"): speculative decoding
  with a lossless verifier emits exactly the target's own greedy decoding (DESIGN.md,
  "Verifier"). One teacher-forced target forward over prompt + output checks it: output token
  i must be the target's argmax after prompt + output[:i]. `lossless` is that check, strictly;
  `first_mismatch` is the first output position that fails (None: none), `max_margin` the
  largest logit gap (target's top token minus the emitted one) over the mismatches. The forward
  here is one causal pass without a cache, the decoding's were tree passes over a cache: in
  float32 they agree to rounding; in bfloat16 / float16 two nearly tied tokens may swap, which
  shows as a mismatch with a margin at the dtype's rounding (look at max_margin before calling
  a trial lossy), while a broken verifier leaves margins of real size.
- Temperature > 0 (`sampling_certificate`, check "sampling_verifier_claim"): one sample says
  nothing about a distribution, so `lossless` is None (not checked). Stored instead is what is
  checkable: the verifier, the tree sampling it verified, whether the verifier declares that
  sampling lossless at this temperature (engine/verify MODES), and whether it is one of the
  verifiers whose output law the test suite checks by chi-square on the tiny pairs
  (DISTRIBUTION_TESTED). A claim backed by tests, not a proof for this trial.

`trial_certificate` pools a trial's per-prompt certificates (as stored in its per_prompt).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from engine.methods import Method, tree_sampling
from engine.verify import VERIFIERS

GREEDY_CHECK = "greedy_teacher_forced"
SAMPLING_CLAIM = "sampling_verifier_claim"
# verifiers whose emitted tokens tests/engine/verify/test_verifier_contract.py (Monte Carlo,
# 1e5 samples per verifier) and tests/engine/verify/test_verifier_e2e.py (chi-square through
# generate(), the draft at the target's and at its own temperature) check against the target's
# law; a test holds this tuple to those files' lists
DISTRIBUTION_TESTED = (
    "nss",
    "naive",
    "naive_tree",
    "spectr",
    "specinfer",
    "khisti",
    "khisti_tournament",
    "bv",
    "traversal",
)
DISTRIBUTION_TESTS = (
    "tests/engine/verify/test_verifier_contract.py, tests/engine/verify/test_verifier_e2e.py"
)


@torch.inference_mode()
def greedy_certificate(model: Any, prompt_ids: list[int], tokens: list[int]) -> dict[str, Any]:
    """Check `tokens` (the output) against the greedy decoding of `model` (an HF causal LM)
    after `prompt_ids`, with one teacher-forced forward; see the module docstring."""
    n = len(tokens)
    if n == 0:
        return {"check": GREEDY_CHECK, "lossless": True, "checked": 0, "first_mismatch": None}
    device = next(model.parameters()).device
    ids = torch.tensor([list(prompt_ids) + list(tokens[:-1])], device=device)  # [1, L]
    # logits after prompt[-1], output[0], .., output[-2]: the last n positions only
    logits = model(input_ids=ids, logits_to_keep=n).logits[0]  # [n, V]
    emitted = torch.tensor(tokens, device=device)  # [n]
    best = logits.argmax(-1)  # [n]
    wrong = (best != emitted).nonzero().flatten()  # [m]
    out: dict[str, Any] = {
        "check": GREEDY_CHECK,
        "lossless": wrong.numel() == 0,
        "checked": n,
        "first_mismatch": None,
    }
    if wrong.numel():
        rows = logits[wrong].float()  # [m, V]
        gap = rows.max(-1).values - rows.gather(-1, emitted[wrong, None])[:, 0]  # [m]
        out.update(
            first_mismatch=int(wrong[0]), mismatches=int(wrong.numel()), max_margin=float(gap.max())
        )
    return out


def sampling_certificate(method: Method, temperature: float, draft_temperature: float | None):
    """What a trial at temperature > 0 can state about losslessness: a claim, not a check."""
    dt = temperature if draft_temperature is None else draft_temperature
    mode = tree_sampling(method.name, dt)
    return {
        "check": SAMPLING_CLAIM,
        "lossless": None,  # not checked: one sample per prompt cannot show a distribution
        "verifier": method.verifier,
        "tree_sampling": mode,
        "verifier_declares_lossless": VERIFIERS[method.verifier].accepts(mode, temperature),
        "verifier_distribution_tested": method.verifier in DISTRIBUTION_TESTED,
        "distribution_tests": DISTRIBUTION_TESTS,
    }


def certificate(
    model: Any,
    method: Method,
    prompt_ids: list[int],
    tokens: list[int],
    temperature: float,
    draft_temperature: float | None = None,
) -> dict[str, Any]:
    """One generation's certificate: the greedy check at temperature 0, else the claim."""
    if temperature == 0.0:
        return greedy_certificate(model, prompt_ids, tokens)
    return sampling_certificate(method, temperature, draft_temperature)


def trial_certificate(per_prompt: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """A trial's certificate from its stored per-prompt ones (None: the trial ran uncertified).
    Greedy: lossless iff every prompt's output passed, with the first failing prompt and
    position; sampling: the claim (the same for every prompt)."""
    certs = [p.get("certificate") for p in per_prompt]
    if not certs or any(c is None for c in certs):
        return None
    if certs[0]["check"] != GREEDY_CHECK:
        return dict(certs[0])
    failed = [(p.get("id"), c) for p, c in zip(per_prompt, certs) if not c["lossless"]]
    out: dict[str, Any] = {
        "check": GREEDY_CHECK,
        "lossless": not failed,
        "prompts": len(certs),
        "checked": sum(c["checked"] for c in certs),
        "failed_prompts": len(failed),
    }
    if failed:
        prompt, c = failed[0]
        out.update(
            first_failed_prompt=prompt,
            first_mismatch=c["first_mismatch"],
            max_margin=max(c["max_margin"] for _, c in failed),
        )
    return out
