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
from types import SimpleNamespace

import torch

from engine.models import LoadedModel, Pair


class Restricted(torch.nn.Module):
    """A causal LM whose output is its first V logits, times `scale`, plus `bias` [V]."""

    def __init__(self, model, vocab: int, scale: float, bias: torch.Tensor) -> None:
        super().__init__()
        self.inner, self.vocab, self.scale = model, vocab, scale
        self.register_buffer("bias", bias)
        self.config = model.config

    @property
    def device(self):
        return self.inner.device

    @property
    def dtype(self):
        return self.inner.dtype

    def forward(self, **kwargs):
        out = self.inner(**kwargs)
        return SimpleNamespace(logits=out.logits[..., : self.vocab] * self.scale + self.bias)


def restricted_pair(
    pair: Pair, vocab: int = 8, scale: float = 3.0, bias_std: float = 0.8, seed: int = 5
) -> Pair:
    bias = torch.randn(vocab, generator=torch.Generator().manual_seed(seed)) * bias_std

    def wrap(m: LoadedModel, b: torch.Tensor) -> LoadedModel:
        return LoadedModel(
            name=m.name + f"-v{vocab}",
            model=Restricted(m.model, vocab, scale, b),
            tokenizer=m.tokenizer,
            device=m.device,
            dtype=m.dtype,
        )

    return Pair(target=wrap(pair.target, torch.zeros(vocab)), draft=wrap(pair.draft, bias))


@torch.inference_mode()
def exact_law(model, prompt: list[int], n: int, vocab: int) -> torch.Tensor:
    """P(y_1..y_n) of autoregressive sampling at temperature 1: [vocab] * n, float64."""
    law = torch.ones(())
    for k in range(n):
        ctx = [prompt + list(c) for c in itertools.product(range(vocab), repeat=k)]
        logits = model(input_ids=torch.tensor(ctx)).logits[:, -1].double()  # [V^k, V]
        law = (law.reshape(-1, 1) * torch.softmax(logits, -1)).reshape([vocab] * (k + 1))
    return law


def pooled(expected: torch.Tensor, min_expected: float = 5.0) -> torch.Tensor:
    """Cell -> bin index: cells with expected count < min_expected share one bin."""
    small = expected < min_expected
    bins = torch.cumsum(~small, 0) - 1
    return torch.where(small, int((~small).sum()), bins)


def chi_square(
    counts: torch.Tensor, law: torch.Tensor, alt: torch.Tensor | None = None, alpha: float = 1e-3
) -> tuple[float, float | None]:
    """Goodness of fit of `counts` (flat, n samples) to `law` (flat probabilities): p-value, and
    the test's power at level alpha against the alternative law `alt` (noncentral chi-square,
    lambda = n * sum (alt - law)^2 / law over the pooled bins)."""
    from scipy import stats

    n = float(counts.sum())
    bins = pooled(n * law)
    k = int(bins.max()) + 1
    obs = torch.zeros(k, dtype=torch.float64).index_add_(0, bins, counts.double())
    exp = torch.zeros(k, dtype=torch.float64).index_add_(0, bins, n * law.double())
    stat = float(((obs - exp) ** 2 / exp).sum())
    pvalue = float(stats.chi2.sf(stat, k - 1))
    power = None
    if alt is not None:
        alt_b = torch.zeros(k, dtype=torch.float64).index_add_(0, bins, alt.double())
        lam = float(n * ((alt_b - exp / n) ** 2 / (exp / n)).sum())
        power = float(stats.ncx2.sf(stats.chi2.isf(alpha, k - 1), k - 1, lam))
    return pvalue, power
