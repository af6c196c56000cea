"""What one iteration returns, whichever path ran it (engine/iteration/): the tree, the
verifier's answer, the tokens it yields and its timings as stamps on the generation's clock
(engine/clock.py), with the counters every path ends with (`make_step`)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.runtime.eager import CachedModel
from engine.tree import Tree
from engine.verify import Accept


@dataclass(frozen=True)
class Step:
    """One iteration: the tree, the verifier's answer, the tokens it yields, and its timings
    as stamps on the generation's clock (engine/clock.py), resolved when the generation ends."""

    tree: Tree
    accept: Accept
    new: list[int]  # accepted path tokens + the correction/bonus token (before truncation)
    # stamps: start, tree built (draft forwards included), target forward done, verified
    stamps: tuple[int, int, int, int]
    draft_spans: list[tuple[int, int]]  # (start, end) stamps of the draft forwards in it
    target_spans: list[tuple[int, int]]  # and of the target's
    draft_forwards: int  # draft-model forwards while building the tree
    draft_tokens: int  # tokens fed in them
    # [2] long, on the device (read once per generation, not per iteration): drafted nodes
    # whose token is the target's top token after their parent (DynaTree Sec. 4.2), and 1 if
    # the last node the verifier reached has drafted children (for the depth-wise acceptance
    # of the delayed-tree paper, Sec. 5; engine/metrics.py acceptance_definitions); or the
    # pair as host ints, where the iteration knew them without a read (engine/iteration/chain.py)
    counts: torch.Tensor | tuple[int, int] | None = None


def forward_counters(target: CachedModel, lm: CachedModel) -> tuple[int, int, int, int]:
    """The draft's and the target's forwards timed so far, and the draft's forward calls and
    tokens, at the start of an iteration (make_step takes the differences)."""
    return len(lm.spans), len(target.spans), lm.forward_calls, lm.forward_tokens


def make_step(
    target: CachedModel,
    lm: CachedModel,
    before: tuple[int, int, int, int],
    stamps: tuple[int, int, int, int],
    tree: Tree,
    accept: Accept,
    new: list[int],
    counts: torch.Tensor | tuple[int, int],
) -> Step:
    """A Step from an iteration's stamps on target.clock (start, tree built, target forward
    done, verified) and its forward counters at the start (forward_counters); every iteration
    path (engine/iteration/*.py) ends here. generate() gives both models one clock, so every
    stamp and span indexes the same list."""
    draft0, target0, calls0, tokens0 = before
    return Step(
        tree=tree,
        accept=accept,
        new=new,
        stamps=stamps,
        draft_spans=lm.spans[draft0:],
        target_spans=target.spans[target0:],
        draft_forwards=lm.forward_calls - calls0,
        draft_tokens=lm.forward_tokens - tokens0,
        counts=counts,
    )


def read_counts(counts: list) -> list[tuple[int, int]]:
    """Every iteration's Step.counts as host ints: the device ones in one read (one per
    generation), the host pairs as they are."""
    on_device = [c for c in counts if isinstance(c, torch.Tensor)]
    read = iter(torch.stack(on_device).tolist() if on_device else [])
    return [c if isinstance(c, tuple) else next(read) for c in counts]


def acceptance_counts(tree: Tree, best: torch.Tensor, accept: Accept) -> torch.Tensor:
    """[2] long on the tree's device, no host read: drafted nodes whose token is the target's
    top token after their parent (best [N]: argmax of the raw logits, the top token at any
    temperature and top-p), and whether the last node the verifier reached has drafted
    children."""
    parents = tree.parents.to(best.device)
    top_match = (tree.tokens[1:].to(best.device) == best[parents[1:]]).sum()
    last = accept.path[-1] if accept.path else 0
    return torch.stack([top_match, (parents == last).any().long()])


def host_counts(
    best: list[int], tokens: list[int], parents: list[int], accept: Accept
) -> tuple[int, int]:
    """acceptance_counts from a greedy verification's host read (greedy.read_and_walk)."""
    top_match = sum(tokens[i] == best[parents[i]] for i in range(1, len(tokens)))
    last = accept.path[-1] if accept.path else 0
    return top_match, int(last in parents)
