"""Warping, residuals and sampling without replacement."""

import itertools

import pytest
import torch
from scipy.stats import chisquare

from engine.sampling import (
    Warp,
    residual,
    sample,
    sample_without_replacement,
    top_p_filter,
    warp,
    without_replacement_residual,
)


def test_greedy_warp_is_one_hot_argmax():
    logits = torch.tensor([[0.1, 3.0, -1.0], [2.0, 1.0, 0.0]])
    assert torch.equal(warp(logits, Warp(0.0)), torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]))


def test_temperature_and_top_p():
    logits = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
    torch.testing.assert_close(warp(logits, Warp(1.0)), torch.tensor([0.5, 0.3, 0.15, 0.05]))
    # nucleus 0.8: smallest prefix with mass >= 0.8 is {0.5, 0.3}
    torch.testing.assert_close(
        warp(logits, Warp(1.0, top_p=0.8)), torch.tensor([0.5, 0.3, 0.0, 0.0]) / 0.8
    )
    # 0.81 needs the third token too
    assert (warp(logits, Warp(1.0, top_p=0.81)) > 0).sum() == 3
    hot = warp(logits, Warp(0.5))
    torch.testing.assert_close(hot, torch.softmax(logits / 0.5, -1))
    assert top_p_filter(torch.tensor([0.25, 0.25, 0.25, 0.25]), 0.5).count_nonzero() == 2


@pytest.mark.parametrize("bad", [dict(temperature=-1.0), dict(top_p=0.0), dict(top_p=1.5)])
def test_warp_rejects_bad_settings(bad):
    with pytest.raises(ValueError):
        Warp(**bad)


def test_residual():
    p = torch.tensor([0.5, 0.3, 0.2])
    q = torch.tensor([0.2, 0.5, 0.3])
    torch.testing.assert_close(residual(p, q), torch.tensor([1.0, 0.0, 0.0]))
    torch.testing.assert_close(residual(p, p), p)  # undefined case stays finite


def test_sample_uses_the_generator():
    probs = torch.full((1000, 10), 0.1)
    a = sample(probs, torch.Generator().manual_seed(3))
    b = sample(probs, torch.Generator().manual_seed(3))
    assert torch.equal(a, b) and a.shape == (1000,)


def test_without_replacement_matches_sequential_law():
    """Gumbel-top-2 pairs are distributed as two sequential draws without replacement."""
    probs = torch.tensor([0.4, 0.3, 0.2, 0.1, 0.0])
    gen = torch.Generator().manual_seed(0)
    n = 20000
    counts = {}
    for _ in range(n):
        pair = tuple(sample_without_replacement(probs, 2, gen).tolist())
        counts[pair] = counts.get(pair, 0) + 1
    pairs = [(a, b) for a, b in itertools.permutations(range(4), 2)]
    assert set(counts) <= set(pairs), "zero-probability token drawn"
    expect = [
        float(probs[a] * without_replacement_residual(probs, torch.tensor([a]))[b]) * n
        for a, b in pairs
    ]
    observed = [counts.get(pr, 0) for pr in pairs]
    expect = [e * sum(observed) / sum(expect) for e in expect]  # float rounding of the total
    assert chisquare(observed, expect).pvalue > 1e-4
    assert len(sample_without_replacement(probs, 10, gen)) == 4  # capped by the support
