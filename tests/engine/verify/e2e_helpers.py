"""The world and the statistics of the end-to-end sampling tests
(tests/engine/verify/test_verifier_e2e.py; tests/engine/verify/test_lookup_sampling.py uses the
same): the 8-token view of the tiny llama pair, the target's warp, and chi-square tests of
goodness of fit and homogeneity with their power against an alternative law, at the level of
test_verifier_e2e.py's family of tests."""

from __future__ import annotations

import functools

import torch
from scipy.stats import chi2, chi2_contingency, ncx2

from engine.models import Pair
from engine.sampling import Warp
from engine.verify import VERIFIERS
from tests.engine.drafters.dist import restricted_pair

STOCHASTIC = [v for v in VERIFIERS if v != "greedy"]
V_SMALL, SCALE, DRAFT_BIAS_STD = 8, 1.5, 0.3
FAMILY_ALPHA = 1e-3
# engine/config.py ENGINES (compiled: tests/engine/runtime/test_fast_path.py)
ENGINES = ["eager", "fast"]
# 2 chi-square tests per verifier and engine path, Bonferroni
ALPHA = FAMILY_ALPHA / (2 * len(STOCHASTIC) * len(ENGINES))
WARP = Warp(temperature=1.0, top_p=0.9)
MIN_POWER = 0.99  # required power of both tests against the draft law (checked by the tests)


@functools.lru_cache(maxsize=None)
def small_pair(pair: Pair) -> Pair:
    return restricted_pair(pair, vocab=V_SMALL, scale=SCALE, bias_std=DRAFT_BIAS_STD, seed=5)


def _cells(law: torch.Tensor, n: int) -> torch.Tensor:
    """Cell -> bin: cells expected fewer than 5 times in n samples share the last bin."""
    small = law * n < 5
    return torch.where(small, int((~small).sum()), torch.cumsum(~small, 0) - 1)


def one_sample(samples: torch.Tensor, law: torch.Tensor, alt: torch.Tensor | None = None):
    """Chi-square goodness of fit of samples to `law`: (p-value, power against `alt` at level
    ALPHA from the noncentral chi-square, lambda = n sum (alt - law)^2 / law over the bins)."""
    n = samples.numel()
    bins = _cells(law, n)
    k = int(bins.max()) + 1
    exp = torch.zeros(k, dtype=torch.float64).index_add_(0, bins, law) * n
    obs = torch.bincount(bins[samples], minlength=k).double()
    pvalue = float(chi2.sf(float(((obs - exp) ** 2 / exp).sum()), k - 1))
    power = None
    if alt is not None:
        a = torch.zeros(k, dtype=torch.float64).index_add_(0, bins, alt) * n
        lam = float(((a - exp) ** 2 / exp).sum())
        power = float(ncx2.sf(chi2.isf(ALPHA, k - 1), k - 1, lam))
    return pvalue, power


def two_sample(
    a: torch.Tensor, b: torch.Tensor, law: torch.Tensor, alt: torch.Tensor | None = None
):
    """Chi-square homogeneity of samples a (n1) and b (n2) on the bins of `law`: (p-value,
    power when a follows `alt` and b follows `law`, noncentral chi-square with
    lambda = n1 n2 / (n1 + n2) sum (alt - law)^2 / law)."""
    n1, n2 = a.numel(), b.numel()
    bins = _cells(law, n1)
    k = int(bins.max()) + 1
    table = torch.stack(
        [torch.bincount(bins[a], minlength=k), torch.bincount(bins[b], minlength=k)]
    )
    table = table[:, table.sum(0) > 0]
    pvalue = float(chi2_contingency(table.numpy())[1])
    power = None
    if alt is not None:
        law_b = torch.zeros(k, dtype=torch.float64).index_add_(0, bins, law)
        alt_b = torch.zeros(k, dtype=torch.float64).index_add_(0, bins, alt)
        lam = n1 * n2 / (n1 + n2) * float(((alt_b - law_b) ** 2 / law_b).sum())
        power = float(ncx2.sf(chi2.isf(ALPHA, k - 1), k - 1, lam))
    return pvalue, power
