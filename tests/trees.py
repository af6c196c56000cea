"""Random draft trees for the tests and the kernel benchmark (bench/tree_attention.py).

Every tree is a parent array in topological order: node 0 has parent -1 (the last
committed prefix position) and every node's parent index is smaller than its own.

``parent_arrays`` is the hypothesis strategy of every property test that draws trees.

``random_bushy_tree`` draws, from a torch.Generator, the shape that level-by-level
drafters (DySpec Sec. 4.2, DDTree Sec. 4.3) emit: a fixed number of levels, nodes spread
over the levels, and within a level the children concentrated on a few high-probability
parents (a Zipf-like preference for low sibling rank), numbered in BFS order (level by
level, children of one parent contiguous). That order is the one the DySpec reorder
(App. C) improves on.
"""

from __future__ import annotations

import torch


def random_bushy_tree(
    n: int,
    depth: int,
    gen: torch.Generator,
    zipf: float = 1.2,
) -> torch.Tensor:
    """Parents (LongTensor[n], BFS order) of a random tree with one root (node 0, parent -1).

    ``depth`` levels below the root are filled (fewer when n is small); each node picks a
    parent on the level above with probability proportional to (rank + 1) ** -zipf.
    """
    if n < 1:
        raise ValueError("a tree needs at least one node")
    levels = min(depth, n - 1)
    # Level of every non-root node: one per level guarantees no level is empty.
    extra = torch.randint(1, levels + 1, (n - 1 - levels,), generator=gen) if levels else None
    level_of = torch.arange(1, levels + 1)
    if extra is not None:
        level_of = torch.sort(torch.cat([level_of, extra])).values  # [n - 1]
    counts = (
        torch.bincount(level_of, minlength=levels + 1)
        if levels
        else torch.zeros(1, dtype=torch.long)
    )
    counts[0] = 1
    parents = torch.full((n,), -1, dtype=torch.long)
    first = 0  # index of the first node on the level above
    for level in range(1, levels + 1):
        above, here = int(counts[level - 1]), int(counts[level])
        weight = (torch.arange(above, dtype=torch.float64) + 1.0) ** -zipf  # [above]
        picks = torch.multinomial(weight, here, replacement=True, generator=gen)  # [here]
        start = first + above
        parents[start : start + here] = first + torch.sort(picks).values
        first = start
    return parents


def parent_arrays(max_nodes: int = 40, *, forest: bool = False):
    """Hypothesis strategy of parent arrays (list[int]) of 1 to ``max_nodes`` nodes:
    parents[0] = -1 and parents[j] in [0, j - 1], every tree shape reachable. With
    ``forest`` parents[j] may also be -1 (several roots under the committed prefix, which
    the kernels accept and ``engine.tree.make_tree`` does not)."""
    # Imported here: the benchmark needs only random_bushy_tree and runs without hypothesis.
    from hypothesis import strategies as st

    lowest = -1 if forest else 0

    def of_size(n: int):
        return st.tuples(st.just(-1), *[st.integers(lowest, j - 1) for j in range(1, n)]).map(list)

    return st.integers(1, max_nodes).flatmap(of_size)
