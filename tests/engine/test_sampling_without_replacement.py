"""engine.sampling's draws without replacement: the law the SpecInfer / DySpec
without-replacement variants (engine/verify/specinfer.py, traversal.py) rely on."""

import torch
from scipy.stats import chi2

from engine.sampling import sample_without_replacement, without_replacement_residual


def test_two_draws_follow_sequential_sampling_without_replacement():
    """(X1, X2) ~ q(a) q(b) / (1 - q(a)), a != b: chi-square on the 20 ordered pairs, level 1e-4
    (20000 draws; a drop of X2's renormalisation shifts the law by far more than the noise)."""
    q = torch.tensor([0.4, 0.25, 0.2, 0.1, 0.05])
    gen = torch.Generator().manual_seed(0)
    n = 20_000
    pairs = torch.stack([sample_without_replacement(q, 2, gen) for _ in range(n)])  # [n, 2]
    counts = torch.bincount(pairs[:, 0] * 5 + pairs[:, 1], minlength=25).double()
    qd = q.double()
    law = (qd[:, None] * qd[None, :] / (1 - qd[:, None])).fill_diagonal_(0).reshape(-1)
    assert float(counts[law == 0].sum()) == 0  # never the same token twice
    exp = law[law > 0] * n
    stat = float(((counts[law > 0] - exp) ** 2 / exp).sum())
    assert chi2.sf(stat, exp.numel() - 1) > 1e-4


def test_support_caps_the_draws_and_residual_renormalises():
    q = torch.tensor([0.0, 0.7, 0.0, 0.3])
    drawn = sample_without_replacement(q, 3, torch.Generator().manual_seed(1))
    assert sorted(drawn.tolist()) == [1, 3]  # only the two tokens with mass
    rest = without_replacement_residual(q, torch.tensor([1]))
    assert torch.allclose(rest, torch.tensor([0.0, 0.0, 0.0, 1.0]))
