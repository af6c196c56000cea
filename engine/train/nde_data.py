"""The NDE selector's training data (delayed-tree paper, Sec. 6): for roots along target
trajectories, the root features (Appendix E) and, for every action a = (K, L1, L2) of the
action space (Eq. 8), the block efficiency E[tau + 1 | x, a] estimated as in Eq. 1-3: the mean
over s sampled (K, L1, L2)-delayed trees of E[tau + 1 | T] (engine/verify/formulas.py), which
removes verification variance. Time T-hat(x, a) (Eq. 11) needs only the root's context length
and the latency curves measured once (engine/drafters/delayed/selector.py Latency); both are stored.

Steps, per prompt:
1. the trajectory: decode `max_new_tokens` with `delayed` at a fixed action (lossless: the
   tokens follow the target's law, as the paper's "fixed target model trajectories");
2. a root every `stride` tokens of it (the paper: every 16), from the prompt's last token on;
3. at each root: the target catches up causally to the token before the root (its last row is
   p_prev), the draft feeds the preceding token and the root (q_prev, q_root), features;
4. per sample j = 1..s, one superset tree: a trunk of L1_max draft tokens and, below every trunk
   prefix (L1 = 0..L1_max), K_max i.i.d. branches of L2_max tokens. Action (K, L1, L2)'s sample
   j is the sub-tree of the trunk's first L1 nodes and the first L2 nodes of the first K
   branches below trunk node L1: a (K, L1, L2)-delayed tree drawn exactly as Def. 5.2 draws
   it (the same draws shared across actions: common random numbers, each action's estimate
   stays unbiased). One target forward over the superset tree (ancestor-only mask) gives the
   target's p at every node of every sub-tree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import torch

from engine.decode import generate
from engine.draft import DecodeState, DraftModel, TreeBuilder
from engine.drafters.delayed import DRAFTER as DELAYED
from engine.drafters.delayed.build import SAMPLING
from engine.drafters.delayed.selector import K_MAX, L1_MAX, L2_MAX, Latency, actions, canonical
from engine.drafters.delayed.taps import RootTaps
from engine.drafters.iid import grow_paths, grow_rollouts
from engine.models import Pair
from engine.runtime.eager import CachedModel
from engine.sampling import Warp, warp
from engine.tree import Tree
from engine.verify import formulas


@dataclass(frozen=True)
class CollectConfig:
    k_max: int = K_MAX
    l1_max: int = L1_MAX
    l2_max: int = L2_MAX
    samples: int = 4  # s, sampled trees per root and action (Sec. 5, Eq. 1-3)
    stride: int = 16  # a root every 16 tokens (Sec. 6)
    max_new_tokens: int = 64  # trajectory length per prompt
    temperature: float = 0.0
    top_p: float = 1.0
    verifier: str = "specinfer"  # whose E[tau + 1 | T]; "greedy" at temperature 0
    trajectory: tuple[int, int, int] = (2, 2, 2)  # the fixed delayed action decoding step 1
    seed: int = 0


@dataclass(frozen=True)
class Superset:
    """One sample's superset tree (builder node numbers)."""

    trunk: list[int]  # [l1_max] trunk nodes
    branches: list[list[list[int]]]  # [l1_max + 1][k_max][l2_max]: branch paths below trunk L1


def grow_superset(
    builder: TreeBuilder, cfg: CollectConfig, greedy: bool, gen: torch.Generator
) -> Superset:
    """Step 4: a trunk of l1_max tokens below the root, then k_max i.i.d. branches of l2_max
    tokens below the root and each trunk node, level by level (one draft forward a level)."""
    mult: list[int] = [0] * builder.size  # multiplicities are recounted per sub-tree
    trunk = grow_rollouts(builder, 0, 1, cfg.l1_max, greedy, gen, mult)[0] if cfg.l1_max else []
    points = [0] + trunk  # [l1_max + 1] branching points
    starts = [p for p in points for _ in range(cfg.k_max)]
    paths = grow_paths(builder, starts, cfg.l2_max, greedy, gen, mult)
    k = cfg.k_max
    return Superset(trunk, [paths[i * k : (i + 1) * k] for i in range(len(points))])


def sub_tree(full: Tree, s: Superset, action: tuple[int, int, int]) -> tuple[Tree, list[int]]:
    """Action (K, L1, L2)'s delayed tree inside the superset `full`, and its nodes in `full`.
    Multiplicity: 1 on the trunk, and below the branching point the number of the first K
    branches through the node (equal draws merged, as engine/drafters/delayed/build.py builds)."""
    K, L1, L2 = action
    count: dict[int, int] = {0: 1}
    count.update((n, 1) for n in s.trunk[:L1])
    for path in s.branches[L1][:K]:
        for n in path[:L2]:
            count[n] = count.get(n, 0) + 1
    nodes = sorted(count)  # builder order is topological
    index = {n: i for i, n in enumerate(nodes)}
    parents = [-1] + [index[int(full.parents[n])] for n in nodes[1:]]
    depth = full.depth[nodes]
    tree = Tree(
        tokens=full.tokens[nodes],
        parents=torch.tensor(parents),
        depth=depth,
        q=None if full.q is None else full.q[nodes],
        sampling=full.sampling,
        multiplicity=torch.tensor([count[n] for n in nodes]),
        height=int(depth.max()),
    )
    return tree, nodes


def root_block_efficiency(
    builder: TreeBuilder,
    target: CachedModel,
    state: DecodeState,
    cfg: CollectConfig,
    acts: list[tuple[int, int, int]],
    gen: torch.Generator,
) -> torch.Tensor:
    """Step 4 at one root: [A] E[tau + 1 | x, a] for every action, the mean over s samples."""
    greedy = state.draft_warp.greedy
    samples = [grow_superset(builder, cfg, greedy, gen) for _ in range(cfg.samples)]
    full = builder.tree(SAMPLING.at(greedy))
    logits = target.forward(
        full.tokens,
        full.position_ids(state.prefix_len)[0],
        full.visibility(state.prefix_len),
        full.parents,
    )  # [N, V]
    target.commit([])  # drop the tree: the cache holds the committed prefix again
    p = warp(logits, state.warp)  # [N, V] the target's distribution after each node
    known: dict[tuple[int, int, int], float] = {}
    for a in dict.fromkeys(canonical(a) for a in acts):
        total = 0.0
        for s in samples:
            tree, nodes = sub_tree(full, s, a)
            total += formulas.block_efficiency(tree, p[nodes], cfg.verifier)
        known[a] = total / len(samples)
    return torch.tensor([known[canonical(a)] for a in acts], dtype=torch.float64)


def trajectory(pair: Pair, prompt: list[int], cfg: CollectConfig, seed: int) -> list[int]:
    """Step 1: the prompt followed by the target's continuation (decoded losslessly)."""
    K, L1, L2 = cfg.trajectory
    params = {"K": K, "L1": L1, "L2": L2, "verifier": cfg.verifier}
    out = generate(
        pair, prompt, DELAYED.name, cfg.max_new_tokens, cfg.temperature, cfg.top_p, seed, params
    )
    return list(prompt) + out.tokens


def collect(
    pair: Pair,
    prompts: Sequence[list[int]],
    cfg: CollectConfig,
    latency: Latency,
    progress: Callable[[int], None] | None = None,
) -> dict:
    """Steps 1-4 over `prompts`; returns the dataset (tensors and its description) that
    engine/train/nde.py trains on. progress(n): called after each root with n = 1."""
    acts = actions(cfg.k_max, cfg.l1_max, cfg.l2_max)
    w = Warp(cfg.temperature, cfg.top_p)
    gen = torch.Generator(device=pair.target.device).manual_seed(cfg.seed)
    rows: dict[str, list] = {k: [] for k in ("h_prev_p", "h_prev_q", "h_cur_q", "scalars", "E")}
    lengths = []
    for i, prompt in enumerate(prompts):
        full = trajectory(pair, prompt, cfg, cfg.seed + i)
        target = CachedModel(pair.target.model)
        draft = DraftModel(pair.draft.model, w, CachedModel(pair.draft.model))
        draft.keep_prev = (
            True  # the preceding token is fed with the root (engine/drafters/delayed/taps.py)
        )
        taps = RootTaps(target, draft.lm)
        try:
            for r in range(max(len(prompt) - 1, 1), len(full), cfg.stride):  # step 2
                target.extend(full[target.committed : r])  # step 3: up to the preceding token
                taps.keep_target_row(-1)
                state = DecodeState(prefix_len=r, root_token=full[r], warp=w, remaining=1 << 30)
                builder = draft.start(full[: r + 1])
                builder.expand([0])  # the preceding token and the root
                f = taps.features(state, latency)
                E = root_block_efficiency(builder, target, state, cfg, acts, gen)
                for key, value in (
                    ("h_prev_p", f.h_prev_p),
                    ("h_prev_q", f.h_prev_q),
                    ("h_cur_q", f.h_cur_q),
                    ("scalars", f.scalars),
                    ("E", E),
                ):
                    rows[key].append(value.cpu())
                lengths.append(r + 1)
                if progress:
                    progress(1)
        finally:
            taps.close()
    if not lengths:
        raise ValueError("no roots collected: the prompts and trajectories are too short")
    data = {k: torch.stack(v) for k, v in rows.items()}  # [R, ...]
    data["context_length"] = torch.tensor(lengths)  # [R]
    data["actions"] = acts
    data["latency"] = latency.to_dict()
    data["collect"] = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(cfg).items()}
    return data
