"""The draft tree: parallel tensors in topological order (DESIGN.md, "Core types").

Node 0 is the root, the last committed token; every other node is a drafted token whose
parent index is smaller than its own.

Stochastic trees ("iid", "without_replacement") keep, for every expanded node, the draft
distribution its children were drawn from (`q`). Conventions the stochastic verifiers rely on:
- "without_replacement": the children of a node appear in draw order (the first child is the
  first draw from q, the second the first draw from q with the first token removed, ...).
- "iid": siblings carry distinct tokens; rollouts sharing a prefix are merged into one node and
  `multiplicity[i]` counts the parent's draws that produced node i (k i.i.d. rollouts give the
  root children whose multiplicities sum to k). Sibling order is free: verifiers that need a
  draw order draw one at random in proportion to the multiplicities.

The target verifies the whole tree in one forward pass where each node attends to the
committed prefix, its ancestors and itself (the ancestor-only mask of SpecInfer / DDTree
Sec. 3.3), at position ``prefix_len + depth``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch

from engine.transfer import to_device
from tree_kernels.reference import ancestor_matrix

SAMPLING_MODES = ("iid", "without_replacement", "deterministic")


@dataclass(frozen=True)
class TreeSampling:
    """How a drafter draws the siblings of its trees: at temperature 0 and above it.

    A drafter declares this once (its module's `SAMPLING`); its build function stamps the
    mode on every tree it returns and method resolution checks it against the verifier's
    declared modes (engine/methods.py) before any model loads.
    """

    greedy: str  # mode of the trees built at temperature 0
    sampled: str  # mode of the trees built at temperature > 0

    def __post_init__(self) -> None:
        for mode in (self.greedy, self.sampled):
            if mode not in SAMPLING_MODES:
                raise ValueError(f"sampling must be one of {SAMPLING_MODES}, got {mode!r}")

    def at(self, greedy: bool) -> str:
        return self.greedy if greedy else self.sampled


DETERMINISTIC = TreeSampling(greedy="deterministic", sampled="deterministic")


@dataclass(frozen=True)
class Tree:
    tokens: torch.Tensor  # [N] long: node tokens, tokens[0] = root (last committed token)
    parents: torch.Tensor  # [N] long: parent index, parents[0] = -1, parents[i] < i
    depth: torch.Tensor  # [N] long: depth[0] = 0, depth[i] = depth[parents[i]] + 1
    q: torch.Tensor | None = None  # [N, V] draft distribution node i's children came from
    sampling: str = "deterministic"  # how siblings were drawn, see SAMPLING_MODES
    # [N] long, optional: how many of its parent's draws produced node i (i.i.d. rollouts with
    # identical prefixes merged, Def. 3.1 of the delayed-tree paper); None means 1 for every node
    multiplicity: torch.Tensor | None = None
    # max depth when the builder knows it on the host (no read); None: read from `depth`
    height: int | None = None
    # `parents` as a Python list when the builder holds it (the ancestor mask is then built
    # on the host and copied once); None: built on the device from `parents`
    host_parents: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        n = self.tokens.shape[0]
        if n < 1 or self.parents.shape != (n,) or self.depth.shape != (n,):
            raise ValueError(
                f"tree tensors must be [N] with N >= 1, got {self.tokens.shape}, "
                f"{self.parents.shape}, {self.depth.shape}"
            )
        if self.sampling not in SAMPLING_MODES:
            raise ValueError(f"sampling must be one of {SAMPLING_MODES}, got {self.sampling!r}")
        if self.q is not None and self.q.shape[0] != n:
            raise ValueError(f"q must have one row per node, got {tuple(self.q.shape)} for N={n}")
        if self.multiplicity is not None and self.multiplicity.shape != (n,):
            raise ValueError(
                f"multiplicity must be [N], got {tuple(self.multiplicity.shape)} for N={n}"
            )

    @property
    def size(self) -> int:
        return int(self.tokens.shape[0])

    def max_depth(self) -> int:
        """The depth of the deepest node (a host read only when `height` was not given)."""
        return self.height if self.height is not None else int(self.depth.max())

    def children(self, i: int) -> list[int]:
        """Indices of the children of node i, in index order."""
        return torch.nonzero(self.parents == i).flatten().tolist()

    def path_to(self, i: int) -> list[int]:
        """Node indices from the first node below the root down to i (empty for the root)."""
        parents = self.parents.tolist()
        path = []
        while i > 0:
            path.append(i)
            i = parents[i]
        return path[::-1]

    def ancestors(self) -> torch.Tensor:
        """[N, N] bool: entry (i, j) is True iff j is i or an ancestor of i."""
        if self.host_parents is not None:
            return to_device(ancestor_rows(self.host_parents), self.parents.device)
        return ancestor_matrix(self.parents, check=False)  # topological by construction

    def visibility(self, prefix_len: int) -> torch.Tensor:
        """[N, prefix_len + N] bool: every node sees the committed prefix, its ancestors and
        itself."""
        visible = torch.ones(
            self.size, prefix_len + self.size, dtype=torch.bool, device=self.parents.device
        )
        visible[:, prefix_len:] = self.ancestors()
        return visible

    def attention_mask(self, prefix_len: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """[1, 1, N, prefix_len + N] additive mask: 0 where visible, dtype-min elsewhere."""
        return additive_mask(self.visibility(prefix_len), dtype)[None, None]

    def position_ids(self, prefix_len: int) -> torch.Tensor:
        """[1, N] long: prefix_len + depth (DDTree Sec. 3.3: depth-based positions)."""
        return (prefix_len + self.depth)[None]


def additive_mask(visible: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """bool visibility -> additive float mask (0 visible, most negative finite value hidden),
    in one op (a zero fill, a negation and a masked fill cost twice as much for small masks)."""
    return torch.where(visible, _zero(dtype, visible.device), torch.finfo(dtype).min)


@functools.cache
def _zero(dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A 0-dim zero, made once per dtype and device (additive_mask runs once per forward)."""
    return torch.zeros((), dtype=dtype, device=device)


def ancestor_rows(parents: list[int]) -> torch.Tensor:
    """[N, N] bool on the CPU, tree_kernels/reference.py ancestor_matrix from host lists: row i is
    its parent's row plus i itself (topological order). N row copies in numpy cost less than
    the pointer doubling's ~5 log2(N) tensor ops on the host (65 nodes: 22 us against 180 us
    on this CPU; docs/fast_path.md), and the result is one host-to-device copy."""
    n = len(parents)
    anc = np.zeros((n, n), dtype=bool)
    anc[0, 0] = True
    for i in range(1, n):
        anc[i] = anc[parents[i]]
        anc[i, i] = True
    return torch.from_numpy(anc)


def depth_from_parents(parents: list[int]) -> list[int]:
    depth = [0] * len(parents)
    for i in range(1, len(parents)):
        depth[i] = depth[parents[i]] + 1
    return depth


def dfs_preorder(parents: list[int]) -> list[int]:
    """The DFS preorder of a tree given by its parents (root 0, topological), children in
    their own order: tree_kernels/reorder.py dfs_order(heavy_first=False) on host lists, for
    builders that hold their tree in Python (perm[new] = old)."""
    children: list[list[int]] = [[] for _ in parents]
    for i in range(1, len(parents)):
        children[parents[i]].append(i)
    order, stack = [], [0]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(reversed(children[node]))
    return order


def make_tree(
    tokens: list[int],
    parents: list[int],
    q: torch.Tensor | None = None,
    sampling: str = "deterministic",
    device: torch.device | str = "cpu",
    multiplicity: list[int] | None = None,
) -> Tree:
    """Build a Tree from Python lists, checking the topological-order contract."""
    if len(tokens) != len(parents) or not tokens:
        raise ValueError("tokens and parents must be non-empty lists of equal length")
    if parents[0] != -1 or any(not 0 <= p < i for i, p in enumerate(parents) if i > 0):
        raise ValueError("parents must satisfy parents[0] == -1 and 0 <= parents[i] < i")
    depth = depth_from_parents(parents)
    return Tree(
        tokens=to_device(tokens, device, torch.long),
        parents=to_device(parents, device, torch.long),
        depth=to_device(depth, device, torch.long),
        q=q,
        sampling=sampling,
        multiplicity=None if multiplicity is None else to_device(multiplicity, device, torch.long),
        height=max(depth),
        host_parents=tuple(parents),
    )
