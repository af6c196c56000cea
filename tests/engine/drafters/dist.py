"""End-to-end distribution test helpers: a small-vocabulary model pair and an exact
autoregressive reference law, with a chi-square goodness-of-fit test whose power is computed.

The tiny random models are nearly uniform over 260 tokens and their draft is almost the target,
so frequency tests on them have little power. `restricted_pair` keeps the first V logits of the
tiny pair (the prompt uses tokens < V, so generation never leaves them), scales them (sharper
rows) and gives the draft a fixed logit bias, so p and q differ clearly (mean total variation
~0.24 at V = 8, scale 3) while drafts are still often accepted. Distributions, not speed.
"""

from __future__ import annotations

import itertools

import torch

# the small-vocabulary pair and the chi-square test are the package's (orch certify runs them)
from engine.certify.distribution import Restricted, chi_square, pooled, restricted_pair

__all__ = ["Restricted", "chi_square", "exact_law", "pooled", "restricted_pair"]


@torch.inference_mode()
def exact_law(model, prompt: list[int], n: int, vocab: int) -> torch.Tensor:
    """P(y_1..y_n) of autoregressive sampling at temperature 1: [vocab] * n, float64."""
    law = torch.ones(())
    for k in range(n):
        ctx = [prompt + list(c) for c in itertools.product(range(vocab), repeat=k)]
        logits = model(input_ids=torch.tensor(ctx)).logits[:, -1].double()  # [V^k, V]
        law = (law.reshape(-1, 1) * torch.softmax(logits, -1)).reshape([vocab] * (k + 1))
    return law
