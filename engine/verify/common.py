"""Types and helpers shared by all verifiers.

Every verifier is `verify(tree, p, gen) -> Accept` (DESIGN.md, "Verifier"). The helpers here
read the tree once into Python lists (children, tokens, multiplicities: a few dozen nodes), draw
uniforms in batches from the explicit generator, and sample from unnormalised distributions by
inverse CDF, so a verifier costs a handful of vectorised [V] operations per visited node.

Draw orders for i.i.d. trees: siblings of an i.i.d. tree are merged draws with multiplicities
(engine/tree.py), so a verifier that needs the ordered draws X_1..X_k of Definition 3.2 shuffles
the multiset uniformly (`shuffled_draws`); one that needs the first draw X_1 picks a child in
proportion to its multiplicity (`pick_child`); Traversal Verification walks the distinct
children in the order of their first appearance in such a shuffle (`first_appearance_order`).
Each of these has exactly the law of the i.i.d. draws, whatever order the builder stored.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

import torch

from engine.transfer import to_device
from engine.tree import Tree


@dataclass(frozen=True)
class Accept:
    path: list[int]  # accepted node indices below the root, root-to-leaf order
    token: int  # the next token after the path: correction on rejection, else bonus


def require(tree: Tree, modes: tuple[str, ...], name: str, needs_q: bool = True) -> None:
    """Raise a clear ValueError if `tree` was drawn in a way verifier `name` cannot verify.
    A root-only tree (autoregressive step) is fine for every verifier."""
    if tree.size == 1:
        return
    if tree.sampling not in modes:
        raise ValueError(
            f"verifier {name!r} supports trees sampled {' or '.join(modes)}, got "
            f"{tree.sampling!r} (use 'nss' for deterministic trees)"
        )
    if needs_q and tree.q is None and tree.size > 1:
        raise ValueError(f"verifier {name!r} needs the draft distributions tree.q")


def uniforms(gen: torch.Generator | None, device: torch.device, batch: int = 16) -> Iterator[float]:
    """An endless stream of U[0, 1) floats drawn `batch` at a time (one device sync each)."""
    while True:
        yield from torch.rand(batch, generator=gen, device=device, dtype=torch.float64).tolist()


def sample_index(weights: torch.Tensor, u: float) -> int:
    """Inverse-CDF draw from non-negative, possibly unnormalised weights [V] with uniform u.
    Zero-weight entries are never returned."""
    cdf = weights.double().cumsum(0)  # [V]
    i = int(torch.searchsorted(cdf, cdf[-1:] * u, right=True))
    if i >= cdf.shape[0]:  # u * total rounded up to total, or all weights zero
        nz = torch.nonzero(weights > 0).flatten()
        if nz.numel() == 0:
            raise ValueError("cannot sample from an all-zero distribution")
        i = int(nz[-1])
    return i


def positive_part(x: torch.Tensor) -> torch.Tensor:
    """x_+ = max(x, 0), the notation of Appendix B."""
    return x.clamp(min=0.0)


@dataclass(frozen=True)
class Layout:
    """The tree as Python lists: what the sequential parts of a verifier walk over."""

    tokens: list[int]  # [N]
    kids: list[list[int]]  # children of each node, in index order
    mult: list[int]  # [N] draws of the parent that produced each node (1 if not recorded)


def layout(tree: Tree, distinct: bool = False) -> Layout:
    """Read the tree once. distinct=True checks that siblings carry distinct tokens, as merged
    i.i.d. and without-replacement trees must."""
    tokens = tree.tokens.tolist()
    parents = tree.parents.tolist()
    mult = [1] * len(tokens) if tree.multiplicity is None else tree.multiplicity.tolist()
    kids: list[list[int]] = [[] for _ in tokens]
    for i in range(1, len(tokens)):
        kids[parents[i]].append(i)
    if distinct:
        for node, children in enumerate(kids):
            if len({tokens[c] for c in children}) != len(children):
                raise ValueError(
                    f"node {node} has two children with the same token; merge "
                    f"i.i.d. duplicates and record their multiplicity instead"
                )
    return Layout(tokens=tokens, kids=kids, mult=mult)


def child_with_token(lay: Layout, node: int, token: int) -> int | None:
    return next((c for c in lay.kids[node] if lay.tokens[c] == token), None)


def _weighted(children: list[int], mult: list[int], u: float) -> int:
    total = sum(mult[c] for c in children)
    acc, target = 0, u * total
    for c in children:
        acc += mult[c]
        if target < acc:
            return c
    return children[-1]


def pick_child(lay: Layout, node: int, u: float) -> int:
    """One child with probability proportional to its multiplicity: a uniformly chosen draw."""
    return _weighted(lay.kids[node], lay.mult, u)


def shuffled_draws(lay: Layout, node: int, us: Iterator[float]) -> list[int]:
    """The k draws below `node` (children repeated by multiplicity) in uniformly random order:
    distributed exactly as the ordered i.i.d. draws X_1..X_k (Fisher-Yates)."""
    draws = [c for c in lay.kids[node] for _ in range(lay.mult[c])]
    for i in range(len(draws) - 1, 0, -1):
        j = min(int(next(us) * (i + 1)), i)
        draws[i], draws[j] = draws[j], draws[i]
    return draws


def first_appearance_order(lay: Layout, node: int, us: Iterator[float]) -> list[int]:
    """Distinct children in order of first appearance in a uniform shuffle of the draws, i.e.
    successive sampling without replacement in proportion to multiplicity."""
    left, order = list(lay.kids[node]), []
    while left:
        c = _weighted(left, lay.mult, next(us)) if len(left) > 1 else left[0]
        order.append(c)
        left.remove(c)
    return order


def random_chain(lay: Layout, us: Iterator[float], iid: bool) -> list[int]:
    """A root-to-leaf path of first draws: for i.i.d. trees a uniformly chosen rollout (child in
    proportion to multiplicity at each level), otherwise the first-drawn child at each level."""
    chain, node = [], 0
    while lay.kids[node]:
        node = pick_child(lay, node, next(us)) if iid else lay.kids[node][0]
        chain.append(node)
    return chain


# An OTLP solver step for a top-down traversal (Sec. 3.2): given the node and a uniform stream,
# return the next token; the walk moves into the child with that token if there is one.
Solver = Callable[[int, Iterator[float]], int]


def top_down(
    tree: Tree, p: torch.Tensor, lay: Layout, gen: torch.Generator | None, solve: Solver
) -> Accept:
    """OT-based top-down traversal (Sec. 3.2): at every node with children the OTLP solver
    appends a token; the walk continues into the child holding it, and stops with it as the
    correction token when no child does. At a leaf the bonus token is drawn from p."""
    us = uniforms(gen, p.device)
    node, path = 0, []
    while True:
        if not lay.kids[node]:
            return Accept(path=path, token=sample_index(p[node], next(us)))
        token = solve(node, us)
        nxt = child_with_token(lay, node, token)
        if nxt is None:
            return Accept(path=path, token=token)
        path.append(nxt)
        node = nxt


# A pairwise tournament over the draws X_1..X_k (Khisti's KHISTI_TOURNAMENT_SELECT, both
# variants): X_1 is the incumbent; in round j = 1..k-1 it meets X_{j+1} and stays with
# probability keep(j, incumbent token, challenger token), else the challenger takes its place.
Duel = Callable[[int, int, int], float]


def tournament(tokens: list[int], keep: Duel, us: Iterator[float]) -> int:
    """Index of the winning draw; tokens[i] is the token of draw X_{i+1}."""
    winner = 0
    for j in range(1, len(tokens)):
        if next(us) >= keep(j, tokens[winner], tokens[j]):
            winner = j
    return winner


def tournament_law(counts: dict[int, int], keep: Duel) -> dict[int, float]:
    """P(the tournament selects token t | the multiset of draws), averaged over the uniformly
    random order of the draws (the verifiers shuffle them): the exact selection law behind
    Algorithm 15. counts: token -> multiplicity."""
    tokens = sorted(counts)
    k = sum(counts.values())

    @lru_cache(maxsize=None)
    def final(inc: int, left: tuple[int, ...]) -> tuple[float, ...]:
        n = sum(left)
        out = [0.0] * len(tokens)
        if n == 0:
            out[inc] = 1.0
            return tuple(out)
        for j, m in enumerate(left):
            if m == 0:
                continue
            rest = left[:j] + (m - 1,) + left[j + 1 :]
            stay = keep(k - n, tokens[inc], tokens[j])
            kept, lost = final(inc, rest), final(j, rest)
            for t in range(len(tokens)):
                out[t] += m / n * (stay * kept[t] + (1 - stay) * lost[t])
        return tuple(out)

    start = tuple(counts[t] for t in tokens)
    total = [0.0] * len(tokens)
    for j, m in enumerate(start):
        rest = start[:j] + (m - 1,) + start[j + 1 :]
        for t, v in enumerate(final(j, rest)):
            total[t] += m / k * v
    return dict(zip(tokens, total))


# Khisti et al.'s importance-weighted selection (KHISTI_IMPORTANCE_SAMPLE, both variants):
# importance_sample(p, q, k) -> a selection whose `.r` [V] float64 is the law of the selected
# draft token over k i.i.d. draws, and duel(selection, tokens) -> the tournament's keep rule.
ImportanceSample = Callable[[torch.Tensor, torch.Tensor, int], Any]
SelectionDuel = Callable[[Any, list[int]], Duel]


def canonical_verify(
    tree: Tree,
    p: torch.Tensor,
    gen: torch.Generator | None,
    name: str,
    modes: tuple[str, ...],
    importance_sample: ImportanceSample,
    duel: SelectionDuel,
) -> Accept:
    """Khisti et al.'s canonical decomposition (ICLR 2025, Sec. 3, Thm. 1; delayed-tree paper
    Appendix B.5, Algorithm 5) used top-down on an i.i.d. tree (p: [N, V], tree drawn from
    tree.q): at each node the tournament selects one of the draws X_1..X_k, whose law is r, and
    single-draft speculative sampling (NAIVE_OTLP_SOLVER(p, r, [x]), Leviathan et al. 2023)
    accepts it w.p. min(1, p(x)/r(x)), else draws Y ~ norm((p - r)_+). Lossless for any
    selection rule; `khisti` and `khisti_tournament` differ only in importance_sample and duel."""
    require(tree, modes, name)
    lay = layout(tree, distinct=True)

    def solve(node, us):
        draws = shuffled_draws(lay, node, us)  # X_1..X_k, i.i.d. order
        sel = importance_sample(p[node], tree.q[node], len(draws))
        tokens = [lay.tokens[c] for c in draws]
        x = tokens[tournament(tokens, duel(sel, tokens), us)]
        px, rx = torch.stack([p[node, x].double(), sel.r[x]]).tolist()
        if next(us) * rx < px:  # U < p(x) / r(x)
            return x
        return sample_index(positive_part(p[node].double() - sel.r), next(us))

    return top_down(tree, p, lay, gen, solve)


def capped_weights(
    p: torch.Tensor, q: torch.Tensor, nodes: list[int], tokens: torch.Tensor
) -> tuple[list[float], torch.Tensor, list[float]]:
    """The capped running weights of the draft path root = nodes[0] -> ... -> nodes[L] with
    tokens [L] (p, q: [N, V]): w_0 = 1, w_i = min(1, w_{i-1} P_{i-1}(a_i) / Q_{i-1}(a_i)), the
    w-weighted residuals res_i = (w_i P_i - Q_i)_+ [L, V] (float64) and their masses R_i [L].
    Block verification's node weights (Sun et al. 2024c, Alg. 2) and TV's probability of still
    being on the path (Hu & Huang 2024, ASpS) are the same quantity."""
    parents = nodes[:-1]
    ratio = (p[parents, tokens].double() / q[parents, tokens].double()).tolist()  # [L]
    w = [1.0]
    for r in ratio:
        w.append(min(1.0, w[-1] * r))
    weights = to_device(w[:-1], p.device, torch.float64)[:, None]  # [L, 1]
    res = positive_part(weights * p[parents].double() - q[parents].double())  # [L, V]
    return w, res, res.sum(-1).tolist()


# The rule of a single-path verifier: given the draft path (node indices [L]) and the uniform
# stream, how many of its nodes are accepted (tau) and the unnormalised distribution [V] of the
# correction token; None when the whole path is accepted (the bonus is then drawn from p).
PathRule = Callable[[list[int], Iterator[float]], tuple[int, torch.Tensor | None]]


def single_path(
    tree: Tree,
    p: torch.Tensor,
    gen: torch.Generator | None,
    name: str,
    modes: tuple[str, ...],
    rule: PathRule,
) -> Accept:
    """Verify one rollout of the tree (p: [N, V]) with a single-path rule (naive speculative
    sampling, Leviathan et al. 2023; block verification, Sun et al. 2024c; TV, Hu & Huang 2024):
    a uniformly chosen rollout of an i.i.d. tree or the first draws of one drawn without
    replacement (`random_chain`), a draft-sampled path either way."""
    require(tree, modes, name)
    lay = layout(tree)
    us = uniforms(gen, p.device)
    chain = random_chain(lay, us, iid=tree.sampling == "iid")  # [L] node indices
    if not chain:
        return Accept(path=[], token=sample_index(p[0], next(us)))
    tau, correction = rule(chain, us)
    if correction is None:
        return Accept(path=chain, token=sample_index(p[chain[-1]], next(us)))
    return Accept(path=chain[:tau], token=sample_index(correction, next(us)))
