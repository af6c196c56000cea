"""DynaTree: confidence-aware adaptive tree drafting (Chen, Liu, Li 2025; "dynatree.txt").

One iteration grows the tree breadth-first from the root (the last committed token, path
probability p = 1) under a node budget N_max (Sec. 3.3, Algorithm 1 DRAFTTREE):

- Phase 1, dynamic breadth (Sec. 3.3 "Tree expansion"): a node u with draft confidence
  c(u) = max_v q_D(v | u) gets B(u) = B_min if c(u) >= tau_h, B_max if c(u) < tau_l, else B_mid
  children: its B(u) most probable draft tokens.
- Phase 2, dynamic depth (Sec. 3.3 "Dynamic depth control"): u is expandable iff
  d(u) < D_max and p(u) >= rho_stop and (d(u) < D0 or p(u) >= rho_deep), with the cumulative
  path probability p(u) = exp(sum of draft log-probabilities along the path).
- Probability-threshold pruning (Sec. 3.3 "Adaptive pruning", Alg. 1 l. 14): a node with
  p(u) < tau is pruned. Such a node can never be expanded (Alg. 1 skips it), so it is a leaf;
  we prune it by not adding it, which saves its verification slot.
- Phase 3, history adaptation (Sec. 3.3 "Historical adjustment", Alg. 1 l. 7): the mean a_bar
  of the per-iteration acceptance statistic over the last W iterations adjusts (tau_l, tau_h,
  D0). The paper defers the schedule to its Appendix D, which does not give it; we use the
  statistic and rule of the authors' public code: a_r = accepted path length / tree depth of
  iteration r; a_bar >= accept_high -> more aggressive (D0 + 1, tau_h and tau_l lowered by
  adjust_step), a_bar < accept_low -> more conservative (D0 - 1, thresholds raised). We apply
  it as a stateless offset from the configured values (a function of the last W iterations),
  so a tree depends only on the decoding state.

Each phase can be switched off for the paper's ablation (Table 3): `dynamic_breadth=false`
gives every node B_mid children, `dynamic_depth=false` expands exactly to depth D0,
`history_adaptation=false` keeps the configured thresholds. With all three off the method is
the paper's fixed-tree backbone (depth D0, branch B_mid, pruning tau, budget N_max).

Sweep names (DESIGN.md "Sweep file"; paper App. B grid over D, B, tau): `depth` sets D0,
`branch` sets B_mid, `threshold` sets tau. They are consumed when the config is built (the
resolved config shows D0 / B_mid / tau), so `depth=6` and `D0=6` are the same trial. The paper's
450-config grid was run on the fixed-tree backbone; to reproduce it, also pass
dynamic_breadth=false, dynamic_depth=false, history_adaptation=false.

Level by level: the expandable nodes of one depth are fed to the draft in one forward, in FIFO
order, and their children are added in that order until N_max, which is the tree Algorithm 1's
FIFO frontier builds (N_max counts drafted nodes; the root is the committed token). Children
are deterministic (top-B), so at temperature > 0 the tree needs a verifier for deterministic
trees; the paper evaluates greedy decoding only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch

from engine.draft import DecodeState, TreeBuilder
from engine.tree import DETERMINISTIC, Tree

# how this method draws siblings, at temperature 0 and above (engine/tree.py)
SAMPLING = DETERMINISTIC


@dataclass(frozen=True)
class DynaTreeConfig:
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

    def __post_init__(self) -> None:
        for alias, name in (("depth", "D0"), ("branch", "B_mid"), ("threshold", "tau")):
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


def adapted(cfg: DynaTreeConfig, state: DecodeState) -> tuple[int, float, float]:
    """Phase 3: (D0, tau_h, tau_l) for this iteration from the last W iterations (Sec. 3.3,
    a_bar_t = (1/W) sum_{i<W} a_{t-i}); the configured values until W iterations are known."""
    if not cfg.history_adaptation or len(state.history) < cfg.W:
        return cfg.D0, cfg.tau_h, cfg.tau_l
    recent = zip(state.history[-cfg.W :], state.history_depth[-cfg.W :])
    a_bar = sum(min(1.0, acc / d) if d > 0 else 0.0 for acc, d in recent) / cfg.W
    if a_bar >= cfg.accept_high:
        shift, d0 = -cfg.adjust_step, min(cfg.D0 + 1, cfg.D_max - 1)
    elif a_bar < cfg.accept_low:
        shift, d0 = cfg.adjust_step, max(cfg.D0 - 1, 1)
    else:
        return cfg.D0, cfg.tau_h, cfg.tau_l
    tau_h, tau_l = cfg.tau_h + shift, cfg.tau_l + shift
    if not 0.0 < tau_l < tau_h < 1.0:  # keep the thresholds valid at the clamp
        tau_h, tau_l = cfg.tau_h, cfg.tau_l
    return d0, tau_h, tau_l


def build(
    draft: TreeBuilder, state: DecodeState, cfg: DynaTreeConfig, gen: torch.Generator
) -> Tree:
    d0, tau_h, tau_l = adapted(cfg, state)
    max_depth = min(cfg.D_max if cfg.dynamic_depth else d0, state.remaining)
    log_tau = math.log(cfg.tau) if cfg.tau > 0 else -math.inf
    log_stop, log_deep = math.log(cfg.rho_stop), math.log(cfg.rho_deep)
    logp = [0.0]  # node -> log p(u), the cumulative draft log-probability of its path

    def expandable(u: int) -> bool:
        d, lp = draft.depth[u], logp[u]
        if d >= max_depth or lp < log_tau:
            return False
        if not cfg.dynamic_depth:
            return True  # d < D0 already
        return lp >= log_stop and (d < d0 or lp >= log_deep)

    level = [0]
    while level and draft.size - 1 < cfg.N_max:
        frontier = [u for u in level if expandable(u)]  # FIFO order of Algorithm 1
        level = []
        while frontier and draft.size - 1 < cfg.N_max:
            # an expanded node adds at least one child unless pruned: feed at most `room`
            room = cfg.N_max - (draft.size - 1)
            chunk, frontier = frontier[:room], frontier[room:]
            probs = draft.expand(chunk)  # [n, V] drafting distribution below each node
            top_p, top_t = probs.topk(min(cfg.B_max, probs.shape[-1]), dim=-1)  # [n, B_max]
            if cfg.dynamic_breadth:
                conf = top_p[:, 0]  # [n] c(u)
                width = torch.where(
                    conf >= tau_h, cfg.B_min, torch.where(conf < tau_l, cfg.B_max, cfg.B_mid)
                )  # [n]
            else:
                width = torch.full((len(chunk),), cfg.B_mid)
            child_lp = (
                torch.log(top_p.clamp(min=1e-30))
                + torch.tensor([logp[u] for u in chunk], device=probs.device)[:, None]
            )  # [n, B_max]
            keep = (
                torch.arange(top_p.shape[-1], device=probs.device)[None]
                < width[:, None].to(probs.device)
            ) & (child_lp >= log_tau)  # [n, B_max]
            tokens, lps = top_t.tolist(), child_lp.tolist()
            for row, col in keep.nonzero().tolist():  # row-major: FIFO, then rank order
                if draft.size - 1 >= cfg.N_max:
                    break
                level.append(draft.add(chunk[row], tokens[row][col]))
                logp.append(lps[row][col])
    return draft.tree(SAMPLING.at(state.warp.greedy))
