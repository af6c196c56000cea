"""DDTree's tree selected on the device (engine/drafters/ddtree/plan.py) against Algorithm 1's heap
(engine/drafters/ddtree/build.py best_first) and against the paper's definition of the optimal tree
(Prop. 2: the B most probable prefixes under prod_i q_i), on random marginals with ties. The
whole iteration on the tiny pairs: tests/engine/iteration/test_static_tree_path.py."""

from __future__ import annotations

import itertools

import pytest
import torch

from engine.drafters.ddtree.build import best_first
from engine.drafters.ddtree.plan import _pairs, select


def marginals(depth: int, k: int, seed: int, levels: int | None = None, zeros: int = 0):
    """[depth] rows of k probabilities, sorted descending; `levels` distinct values per row
    make ties (in sigma too), `zeros` trailing zero probabilities per row."""
    g = torch.Generator().manual_seed(seed)
    q = torch.rand(depth, k, generator=g, dtype=torch.float64)
    if levels:
        q = (q * levels).ceil() / levels
    if zeros:
        q[:, k - zeros :] = 0.0
    q = (q / q.sum(1, keepdim=True)).sort(1, descending=True).values
    return q.log().tolist()  # -inf for the zeros


def heap_tree(logq, b):
    """best_first's pops as rank tuples, in pop order."""
    paths: list[tuple[int, ...]] = []
    for parent, rank in best_first(logq, b):
        paths.append((paths[parent] if parent >= 0 else ()) + (rank,))
    return paths


def device_tree(logq, b):
    """select's nodes as rank tuples (ranks are the tokens here)."""
    k = len(logq[0])
    levels = select(
        [torch.tensor(r, dtype=torch.float64) for r in logq],
        [torch.arange(k) for _ in logq],
        b,
    )
    paths, above = [], [()]
    for lv in levels:
        rows = [above[p] + (t,) for p, t in zip(lv.par.tolist(), lv.tok.tolist())]
        paths += [r for r, v in zip(rows, lv.valid.tolist()) if v]
        above = rows
    return paths


def key(logq, ranks):
    """The order both use: sigma descending, then depth, then rank tuple."""
    sigma = sum(logq[d][r] for d, r in enumerate(ranks))
    return (-sigma, len(ranks), ranks)


CASES = [  # (depth, K, B, distinct values per row, zero ranks per row)
    (4, 6, 6, None, 0),
    (3, 5, 5, 2, 0),  # heavy ties: two values per row
    (5, 4, 4, 3, 0),
    (3, 8, 8, None, 3),  # zero-probability ranks come after every other prefix
    (2, 4, 4, None, 3),  # one rank of probability > 0 per depth: B takes zero-probability ones
    (2, 3, 3, None, 0),  # 3 + 9 prefixes, B = 3
    (6, 2, 2, 1, 0),  # uniform rows: every sigma of a depth ties
    (3, 6, 4, 2, 0),  # K above B (the depth-1 cut)
    (3, 12, 9, 3, 0),  # K above B, ties: the candidates' cut (j + 1)(r + 1) <= B at work
    (4, 10, 10, 2, 2),
]


@pytest.mark.parametrize(("depth", "k", "b", "levels", "zeros"), CASES)
@pytest.mark.parametrize("seed", range(4))
def test_both_are_the_b_most_probable_prefixes(depth, k, b, levels, zeros, seed):
    logq = marginals(depth, k, seed, levels, zeros)
    every = [p for d in range(1, depth + 1) for p in itertools.product(range(k), repeat=d)]
    want = sorted(every, key=lambda p: key(logq, p))[:b]
    got_heap = heap_tree(logq, b)
    assert got_heap == want  # popped in that order, best first
    assert sorted(device_tree(logq, b)) == sorted(want)
    # Prop. 2: prefix-closed, and no prefix outside has a larger probability than one inside
    assert all(p[:-1] in want for p in want if len(p) > 1)
    worst_in = min(-key(logq, p)[0] for p in want)
    assert all(-key(logq, p)[0] <= worst_in for p in every if p not in want)


def test_device_selection_keeps_b_rows_per_depth_in_rank_tuple_order():
    logq = marginals(3, 4, seed=7, levels=2)
    levels = select([torch.tensor(r) for r in logq], [torch.arange(4)] * 3, 4)
    assert [lv.tok.shape[0] for lv in levels] == [4, 4, 4]
    assert sum(int(lv.valid.sum()) for lv in levels) == 4
    assert levels[0].par.tolist() == [0, 0, 0, 0] and levels[0].tok.tolist() == [0, 1, 2, 3]
    for lv in levels[1:]:  # candidates (parent row, rank) kept in that order
        order = (lv.par * 4 + lv.tok).tolist()
        assert order == sorted(order)


def test_candidates_per_depth_are_about_b_ln_b():
    """The pairs (j, r) that can be among a depth's B best: 7,262 of 1,048,576 at B = 1024."""
    j, r = _pairs(1024, 1024, torch.device("cpu"))
    assert j.shape[0] == sum(1024 // (i + 1) for i in range(1024)) == 7262
    assert bool(((j + 1) * (r + 1) <= 1024).all())
