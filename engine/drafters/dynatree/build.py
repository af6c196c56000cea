"""DynaTree: confidence-aware adaptive tree drafting (Chen, Liu, Li 2025; "dynatree.txt").

Two variants (`variant`), the paper's Algorithm 1 by default:

variant "paper" (App. D, Algorithm 1 DRAFTTREE, lines 9-31, step by step):
- l. 10: run the draft on the prefix and root the tree at its top-1 token u0. In our Tree
  node 0 is the last committed token, so u0 is node 0's single child; its cumulative
  log-probability is l_u0 = log q_D(u0 | x_1:t) (Sec. 3.3: path(u) includes the root) and its
  depth d(u0) = 0 (our depth 1). SELECTCOMMIT (l. 32-42) is then exactly our greedy verifier:
  u0 is committed iff it equals the target's first greedy token, else `first` is emitted.
- l. 11-13: a FIFO frontier A = [u0]; pop while A is non-empty and |T| < N_max (|T| counts
  u0: at most N_max drafted nodes).
- l. 14-25: a popped u is skipped (left in T as an unexpanded leaf) if p(u) < tau (pruning),
  d(u) >= D_max, p(u) < rho_stop (early stopping), or d(u) >= D0 and p(u) < rho_deep (depth
  gating). Children below tau are therefore added and kept as leaves, never dropped.
- l. 26-28: expand u: c(u) = max q_D(.|u); B(u) = B_min if c >= tau_h, B_max if c < tau_l,
  else B_mid; add the top-B(u) children in rank order, pushing each, until |T| = N_max.
- l. 7 / Sec. 3.3 "Historical adjustment": after each iteration r, a_r = the fraction of
  drafted tokens committed (accepted path length / drafted nodes); once W iterations are
  known, a_bar_t = (1/W) sum_{i<W} a_{t-i} and ADJUST(tau_l, tau_h, D0) changes the
  thresholds *persistently* (each adjustment starts from the previous one): a_bar >=
  accept_high -> more aggressive (D0 + 1, tau_h and tau_l lowered by adjust_step), a_bar <
  accept_low -> more conservative (D0 - 1, raised). The paper defers the schedule to App. D,
  which gives only ADJUST's arguments; accept_high / accept_low / adjust_step are the authors'
  public code's values (target acceptance 0.7 +- 0.1, step 0.05). The state is replayed from
  the decoding history (DecodeState.history, history_size), so a tree is still a function of
  the decoding state alone.

variant "ours" (the engine's earlier version), kept because it commits more per iteration on
the real pair: 4.80 vs 4.47 tokens per iteration (7.8 vs 7.3 drafted nodes) at the defaults,
greedy, qwen2.5-coder-1.5b / 0.5b, 4 wikitext2 prompts (last 128 tokens), 48 new tokens,
identical output tokens (on the tiny random pairs with near-zero thresholds the paper's is
ahead: 2.81 vs 2.58 llama, 3.44 vs 2.86 neox, with larger trees):
- the tree is rooted at the last committed token (p = 1, depth 0) and the root gets B(root)
  children like any node, so the first drafted level can branch;
- a child with p(u) < tau is not added (it could never be expanded, so it is dropped instead
  of spending a verification slot);
- Phase 3 statistic a_r = accepted path length / tree depth, applied as a stateless offset
  from the configured values from the last W iterations only.

Both: Phase 1 dynamic breadth (Sec. 3.3 "Tree expansion"), Phase 2 dynamic depth (Sec. 3.3
"Dynamic depth control": expandable iff d(u) < D_max and p(u) >= rho_stop and (d(u) < D0 or
p(u) >= rho_deep)), each phase switchable for the paper's ablation (Table 3):
`dynamic_breadth=false` gives every node B_mid children, `dynamic_depth=false` expands exactly
to depth D0 (gates of l. 17-25 replaced by d(u) < D0), `history_adaptation=false` keeps the
configured thresholds. With all three off the method is the paper's fixed-tree backbone
(depth D0, branch B_mid, pruning tau, budget N_max).

Sweep names (DESIGN.md "Sweep file"; paper App. B grid over D, B, tau): `depth` sets D0,
`branch` sets B_mid, `threshold` sets tau. They are consumed when the config is built (the
resolved config shows D0 / B_mid / tau), so `depth=6` and `D0=6` are the same trial. The paper's
450-config grid was run on the fixed-tree backbone; to reproduce it, also pass
dynamic_breadth=false, dynamic_depth=false, history_adaptation=false.

Level by level: the FIFO frontier of Algorithm 1 holds one depth at a time, so the nodes of
one depth that pass the gates are fed to the draft in one forward, and their children are
added in FIFO-then-rank order until N_max: the same tree, in the same BFS order (l. 3
BFSFLATTEN), as popping one node at a time. Children are deterministic (top-B), so at
temperature > 0 the tree needs a verifier for deterministic trees; the paper evaluates greedy
decoding only. A tree is never grown deeper than the tokens still to emit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal, Optional

import torch

from engine.draft import DecodeState, TreeBuilder
from engine.transfer import read_pair
from engine.tree import DETERMINISTIC, Tree

# how this method draws siblings, at temperature 0 and above (engine/tree.py)
SAMPLING = DETERMINISTIC


@dataclass(frozen=True)
class DynaTreeConfig:
    variant: Literal["paper", "ours"] = "paper"  # Algorithm 1 as written / our earlier version
    D0: int = 5  # base depth (App. A)
    D_max: Optional[int] = None  # hard maximum depth; None -> D0 + 3 (App. A: 5 and 8)
    B_min: int = 1  # children of a confident node, c(u) >= tau_h (App. A)
    B_mid: int = 2  # children when tau_l <= c(u) < tau_h (Sec. 1: "1-3 branches")
    B_max: Optional[int] = None  # children when c(u) < tau_l; None -> B_mid + 1 (App. A: 3)
    tau_h: float = 0.9  # high-confidence threshold (App. A)
    tau_l: float = 0.4  # low-confidence threshold (App. A)
    rho_stop: float = 0.1  # early stopping on p(u); tuned by the paper, authors' code default
    rho_deep: float = 0.5  # deep expansion past D0 on p(u); authors' code default
    tau: float = 0.03  # pruning threshold on p(u) (Sec. 4.6 optimum); 0 disables pruning
    N_max: int = 256  # node budget, drafted nodes (App. A fixed-tree budget)
    W: int = 10  # history window (authors' code)
    dynamic_breadth: bool = True  # Phase 1
    dynamic_depth: bool = True  # Phase 2
    history_adaptation: bool = True  # Phase 3
    accept_high: float = 0.8  # Phase 3: a_bar at or above -> more aggressive (authors' code)
    accept_low: float = 0.6  # Phase 3: a_bar below -> more conservative (authors' code)
    adjust_step: float = 0.05  # Phase 3: threshold shift (authors' code)
    depth: Optional[int] = None  # sweep alias of D0
    branch: Optional[int] = None  # sweep alias of B_mid
    threshold: Optional[float] = None  # sweep alias of tau

    # the sweep names of the paper's grid (App. B: D, B, tau) and the parameters they set
    SWEEP_ALIASES: ClassVar[dict[str, str]] = {"depth": "D0", "branch": "B_mid", "threshold": "tau"}

    def __post_init__(self) -> None:
        for alias, name in self.SWEEP_ALIASES.items():
            value = getattr(self, alias)
            if value is not None:
                if getattr(self, name) != getattr(DynaTreeConfig, name):
                    raise ValueError(f"give either {alias} or {name}, not both")
                object.__setattr__(self, name, value)
                object.__setattr__(self, alias, None)
        if self.D_max is None:
            object.__setattr__(self, "D_max", self.D0 + 3)
        if self.B_max is None:
            object.__setattr__(self, "B_max", self.B_mid + 1)
        if not 1 <= self.D0 < self.D_max:
            raise ValueError(f"need 1 <= D0 < D_max, got D0={self.D0}, D_max={self.D_max}")
        if not 1 <= self.B_min <= self.B_mid <= self.B_max:
            raise ValueError(
                f"need 1 <= B_min <= B_mid <= B_max, got {self.B_min}, {self.B_mid}, {self.B_max}"
            )
        if not 0.0 < self.tau_l < self.tau_h < 1.0:
            raise ValueError(f"need 0 < tau_l < tau_h < 1, got {self.tau_l}, {self.tau_h}")
        if not 0.0 < self.rho_stop < self.rho_deep < 1.0:
            raise ValueError(
                f"need 0 < rho_stop < rho_deep < 1, got {self.rho_stop}, {self.rho_deep}"
            )
        if not 0.0 <= self.tau < 1.0:
            raise ValueError(f"tau must be in [0, 1), got {self.tau}")
        if self.N_max < 1 or self.W < 1:
            raise ValueError(f"N_max and W must be >= 1, got {self.N_max}, {self.W}")
        if not 0.0 <= self.accept_low <= self.accept_high <= 1.0 or self.adjust_step < 0:
            raise ValueError("need 0 <= accept_low <= accept_high <= 1 and adjust_step >= 0")


def _shift(cfg: DynaTreeConfig, a_bar: float, d0: int, tau_h: float, tau_l: float):
    """One ADJUST(tau_l, tau_h, D0) step from (d0, tau_h, tau_l) given a_bar; the thresholds
    move only while they stay valid (0 < tau_l < tau_h < 1)."""
    if a_bar >= cfg.accept_high:
        shift, d0 = -cfg.adjust_step, min(d0 + 1, cfg.D_max - 1)
    elif a_bar < cfg.accept_low:
        shift, d0 = cfg.adjust_step, max(d0 - 1, 1)
    else:
        return d0, tau_h, tau_l
    if 0.0 < tau_l + shift < tau_h + shift < 1.0:
        tau_h, tau_l = tau_h + shift, tau_l + shift
    return d0, tau_h, tau_l


def adapted(cfg: DynaTreeConfig, state: DecodeState) -> tuple[int, float, float]:
    """Phase 3: (D0, tau_h, tau_l) for this iteration (Sec. 3.3 "Historical adjustment",
    a_bar_t = (1/W) sum_{i<W} a_{t-i}; Alg. 1 l. 7); the configured values until W iterations
    are known. See the module docstring for the two variants' statistic and schedule."""
    if not cfg.history_adaptation or len(state.history) < cfg.W:
        return cfg.D0, cfg.tau_h, cfg.tau_l
    if cfg.variant == "ours":
        recent = zip(state.history[-cfg.W :], state.history_depth[-cfg.W :])
        a_bar = sum(min(1.0, acc / d) if d > 0 else 0.0 for acc, d in recent) / cfg.W
        return _shift(cfg, a_bar, cfg.D0, cfg.tau_h, cfg.tau_l)
    # paper: a_r = committed drafted tokens / drafted tokens; ADJUST after every iteration
    # r >= W (l. 7), each step from the previous state: replay it from the history
    if len(state.history_size) != len(state.history):
        raise ValueError("DynaTree's history adaptation needs DecodeState.history_size")
    a = [acc / n if n > 0 else 0.0 for acc, n in zip(state.history, state.history_size)]
    d0, tau_h, tau_l = cfg.D0, cfg.tau_h, cfg.tau_l
    window = sum(a[: cfg.W])
    for t in range(cfg.W, len(a) + 1):  # after iteration t - 1: the last W are a[t-W:t]
        d0, tau_h, tau_l = _shift(cfg, window / cfg.W, d0, tau_h, tau_l)
        if t < len(a):
            window += a[t] - a[t - cfg.W]
    return d0, tau_h, tau_l


def _top(draft: TreeBuilder, nodes: list[int], k: int) -> tuple[list, list[list[int]]]:
    """The k most probable children below each node, as Python lists ([n][k] probabilities
    descending, [n][k] tokens): one host read per draft forward; the gates of Algorithm 1 then
    run in plain Python over a few numbers per node."""
    return read_pair(*draft.expand_top(nodes, k))  # [n, k] twice


def build(
    draft: TreeBuilder, state: DecodeState, cfg: DynaTreeConfig, gen: torch.Generator
) -> Tree:
    d0, tau_h, tau_l = adapted(cfg, state)
    paper = cfg.variant == "paper"
    log_tau = math.log(cfg.tau) if cfg.tau > 0 else -math.inf
    log_stop, log_deep = math.log(cfg.rho_stop), math.log(cfg.rho_deep)
    # d(u) below is the paper's depth: our depth - 1 for the paper (root u0 at our depth 1)
    lift = 1 if paper else 0
    # a node is worth expanding only while its children fit the tokens still to emit
    max_depth = min(cfg.D_max if cfg.dynamic_depth else d0, state.remaining - lift)
    logp = [0.0]  # builder node -> log p(u), the cumulative draft log-probability of its path

    def expandable(u: int) -> bool:  # Alg. 1 l. 14-25 (l. 14 already applied at add for ours)
        d, lp = draft.depth[u] - lift, logp[u]
        if lp < log_tau or d >= max_depth:  # l. 14 pruning, l. 17 hard depth limit
            return False
        if not cfg.dynamic_depth:
            return True  # d < D0 already
        return lp >= log_stop and (d < d0 or lp >= log_deep)  # l. 20 and l. 23

    level = [0]
    if paper:  # l. 10: the root u0 is the draft's top-1 token after the prefix
        if draft.size - 1 >= cfg.N_max or state.remaining < 1:
            return draft.tree(SAMPLING.at(state.draft_warp.greedy))
        probs, tokens = _top(draft, [0], cfg.B_max)
        level = [draft.add(0, tokens[0][0])]
        logp.append(math.log(max(probs[0][0], 1e-30)))
    while level and draft.size - 1 < cfg.N_max:  # l. 12
        frontier = [u for u in level if expandable(u)]  # FIFO order of Algorithm 1
        level = []
        while frontier and draft.size - 1 < cfg.N_max:
            # an expanded node adds at least one child unless pruned: feed at most `room`
            room = cfg.N_max - (draft.size - 1)
            chunk, frontier = frontier[:room], frontier[room:]
            # l. 26: the top B_max of the drafting distribution below each node
            probs, tokens = _top(draft, chunk, cfg.B_max)
            for u, ps, ts in zip(chunk, probs, tokens):  # FIFO, then rank order (l. 28)
                width = cfg.B_mid
                if cfg.dynamic_breadth:  # l. 27, c(u) = ps[0]
                    width = cfg.B_min if ps[0] >= tau_h else cfg.B_max if ps[0] < tau_l else width
                for p, t in zip(ps[:width], ts[:width]):
                    lp = logp[u] + math.log(max(p, 1e-30))
                    if not paper and lp < log_tau:  # ours: dropped, not kept as a leaf
                        continue
                    if draft.size - 1 >= cfg.N_max:
                        break
                    level.append(draft.add(u, t))
                    logp.append(lp)
    return draft.tree(SAMPLING.at(state.draft_warp.greedy))
