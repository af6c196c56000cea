"""Exact metrics of generations, defined once in `METRICS`.

`METRICS` is the one list of what is measured: each entry has its name, Python type, formula
and meaning. `GenerationStats.summary` gives the per-generation ones for one generation; a
trial pools its prompts' generations with `pooled_metrics` (token-weighted where that is the
definition: throughput = all new tokens / all generation time, acceptance = all accepted /
all drafted, tokens per iteration = all new tokens / all target forwards); the orchestrator
stores every entry as a column of the database's `results` table, and a test holds that table
to this list, names and types.

- peak memory: CUDA max allocated bytes on GPU; on CPU the process's peak RSS (ru_maxrss,
  a process-lifetime peak).
- time split: draft (tree building incl. draft forwards), target (tree forward), verify,
  bookkeeping (cache compaction, committing); forward_s is the time inside model forwards only.
- acceptance: the papers define it differently; `acceptance_definitions` gives each one under
  its own name, side by side, from the per-iteration lists (stored per prompt under
  `acceptance` in a trial's per_prompt; over a whole trial: `acceptance_definitions` of its
  stored per_iteration, iterations pooled).
"""

from __future__ import annotations

import functools
import resource
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported where it is used: the driver reads METRICS without it
    import torch  # lazy: torch


@dataclass(frozen=True)
class IterationStats:
    tree_size: int  # nodes including the root
    accepted: int  # accepted draft tokens (path length)
    emitted: int  # tokens committed this iteration (after truncation)
    draft_s: float
    target_s: float
    verify_s: float
    bookkeeping_s: float
    draft_forward_s: float  # part of draft_s spent inside draft-model forwards
    target_forward_s: float  # part of target_s spent inside the target forward
    draft_forwards: int = 0  # draft-model forwards while building the tree
    draft_tokens: int = 0  # tokens fed in those forwards (pending committed tokens included)
    top_match: int = 0  # drafted nodes whose token is the target's top token after their parent
    tried: int = 0  # depths where the verifier stood on a node with drafted children


@dataclass(frozen=True)
class Pool:
    """Generations measured together: one (a summary) or a trial's, one per prompt."""

    generations: tuple[GenerationStats, ...]
    prompt_tokens: tuple[int, ...] = ()  # prompt lengths, one per generation (trials only)

    @functools.cached_property
    def iterations(self) -> tuple[IterationStats, ...]:
        return tuple(s for g in self.generations for s in g.iterations)

    def total(self, field: str) -> int | float:
        return sum(getattr(g, field) for g in self.generations)

    def iteration_total(self, field: str) -> int | float:
        return sum(getattr(s, field) for s in self.iterations)


@dataclass(frozen=True)
class Metric:
    name: str
    type: type  # int or float: the value's Python type and the database column's
    value: Callable[[Pool], int | float]  # over a trial's generations: pooled, see `doc`
    doc: str
    per_generation: bool = True  # False: a trial's only (over its prompts)


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else 0.0


def _forward_s(p: Pool) -> float:
    return p.total("prefill_s") + sum(s.draft_forward_s + s.target_forward_s for s in p.iterations)


def _sum(field: str) -> Callable[[Pool], float]:
    return lambda p: p.iteration_total(field)


METRICS: tuple[Metric, ...] = (
    Metric(
        "new_tokens", int, lambda p: p.total("new_tokens"), "new tokens generated; a trial: the sum"
    ),
    Metric(
        "iterations",
        int,
        lambda p: len(p.iterations),
        "draft-verify iterations (target forwards over a tree); a trial: the sum",
    ),
    Metric(
        "throughput",
        float,
        lambda p: _ratio(p.total("new_tokens"), p.total("total_s")),
        "new tokens / wall time of the generation (prefill included), tokens/s",
    ),
    Metric(
        "acceptance_rate",
        float,
        lambda p: _ratio(
            p.iteration_total("accepted"), p.iteration_total("tree_size") - len(p.iterations)
        ),
        "accepted draft tokens / drafted tokens (tree nodes below the root); for the papers' "
        "other definitions see acceptance_definitions",
    ),
    Metric(
        "tokens_per_iteration",
        float,
        lambda p: _ratio(p.total("new_tokens"), len(p.iterations)),
        "block efficiency tau: new tokens / target forwards",
    ),
    Metric(
        "mean_accepted_length",
        float,
        lambda p: _ratio(p.iteration_total("accepted"), len(p.iterations)),
        "accepted draft tokens per iteration (tau minus the bonus, up to truncation)",
    ),
    Metric(
        "mean_tree_size",
        float,
        lambda p: _ratio(p.iteration_total("tree_size"), len(p.iterations)),
        "draft tree nodes per iteration, the root included",
    ),
    Metric(
        "ttft_s",
        float,
        lambda p: _ratio(p.total("ttft_s"), len(p.generations)),
        "time to first token: prefill + first iteration, s; a trial: the mean",
    ),
    Metric(
        "tpot_s",
        float,
        lambda p: _ratio(
            p.total("total_s") - p.total("ttft_s"), p.total("new_tokens") - len(p.generations)
        ),
        "time per output token after the first: (total - TTFT) / (new tokens - 1), s",
    ),
    Metric(
        "total_s",
        float,
        lambda p: p.total("total_s"),
        "wall time of the generation, s; a trial: the sum",
    ),
    Metric("prefill_s", float, lambda p: p.total("prefill_s"), "prompt prefill time, s"),
    Metric("draft_s", float, _sum("draft_s"), "tree building incl. draft forwards, s"),
    Metric("target_s", float, _sum("target_s"), "target forward over the tree, s"),
    Metric("verify_s", float, _sum("verify_s"), "verification, s"),
    Metric("bookkeeping_s", float, _sum("bookkeeping_s"), "cache compaction and committing, s"),
    Metric(
        "forward_s",
        float,
        _forward_s,
        "time inside model forwards (prefill, draft and target forwards), s",
    ),
    Metric(
        "overhead_share",
        float,
        lambda p: 1.0 - _forward_s(p) / p.total("total_s") if p.total("total_s") > 0 else 0.0,
        "share of wall time spent outside model forwards",
    ),
    Metric(
        "peak_memory_bytes",
        int,
        lambda p: max(g.peak_memory_bytes for g in p.generations),
        "peak memory (see module doc), bytes; a trial: the maximum",
    ),
    Metric(
        "prompts", int, lambda p: len(p.generations), "prompts of the trial", per_generation=False
    ),
    Metric(
        "prompt_tokens_mean",
        float,
        lambda p: sum(p.prompt_tokens) / len(p.prompt_tokens),
        "mean prompt length of the trial, tokens",
        per_generation=False,
    ),
)


ACCEPTANCE_DEFINITIONS = {
    "accepted_per_drafted": "accepted draft tokens / drafted tree nodes (the acceptance_rate "
    "column)",
    "dynatree_acceptance_rate": "DynaTree Sec. 4.2: share of drafted nodes whose token is the "
    "target's greedy (top) token in its node's context, accepted or not",
    "dynatree_mean_path_length": "DynaTree Sec. 4.2: mean accepted path length before the bonus",
    "ddtree_acceptance_length_histogram": "DDTree Sec. 5.1/5.4, Fig. 4: counts[l] of iterations "
    "of acceptance length l = accepted + 1 (the bonus included, as tau), l = 0 unused",
    "ddtree_mean_acceptance_length": "DDTree Sec. 5.1: tau, mean acceptance length incl. bonus",
    "delayed_acceptance_by_depth": "Delayed Tree Expansion Sec. 5, Def. 5.1, Fig. 1: per depth d "
    "[accepted, tried, rate]: of the iterations whose verifier stood at depth d on a node with "
    "drafted children (tried), those that moved on to a child (accepted)",
}


def acceptance_definitions(per_iteration: Sequence[dict]) -> dict:
    """The papers' acceptance measures, each under its own name (ACCEPTANCE_DEFINITIONS), over
    one or more generations' per-iteration lists ({field: [value per iteration]}, as
    GenerationStats.to_dict and results.per_iteration hold them); several generations (a
    trial's prompts) are pooled: counts summed, rates over the sums.

    - accepted / drafted: what this project's `acceptance_rate` column stores.
    - DynaTree (Sec. 4.2, "Evaluation Metrics"): "the fraction of drafted tokens that match
      the target model's greedy predictions under the corresponding conditioning contexts":
      every drafted node whose token is the target's argmax after its parent counts, on the
      accepted path or not (so it is >= accepted / drafted at temperature 0); at T > 0 the
      target's top token. Its "average path length" is the mean accepted length.
    - DDTree (Sec. 5.1, 5.4, Fig. 4): acceptance length tau includes the bonus token; the
      histogram counts iterations per acceptance length (accepted + 1, before truncation).
    - Delayed Tree Expansion (Sec. 5, Def. 5.1, Fig. 1): the acceptance rate of an OT-based
      verifier at a node is the probability that its output token is one of the node's
      children; Fig. 1 plots it against depth. Stored here is its empirical counterpart along
      the verified path: at depth d, of the iterations whose verifier stood on a node with
      drafted children (tried > d), the share that moved on to a child (accepted > d). The
      paper averages the analytic rate (App. C; engine/verify/formulas.py `acceptance`) over
      all nodes of offline trees; this counts the nodes the verifier actually reached.
    Generations stored before these fields existed have no `top_match` / `tried` lists: their
    DynaTree rate and depth-wise acceptance are None."""
    per_iteration = [g for g in per_iteration if g.get("tree_size")]
    accepted = [a for g in per_iteration for a in g["accepted"]]
    drafted = sum(s - 1 for g in per_iteration for s in g["tree_size"])
    n = len(accepted)
    hist = [0] * (max(accepted, default=-1) + 2)
    for a in accepted:
        hist[a + 1] += 1
    complete = all("top_match" in g and "tried" in g for g in per_iteration)
    by_depth = None
    if complete:
        tried = [t for g in per_iteration for t in g["tried"]]
        by_depth = []
        for d in range(max(tried, default=0)):
            ok, at = sum(a > d for a in accepted), sum(t > d for t in tried)
            by_depth.append([ok, at, _ratio(ok, at)])
    top = sum(t for g in per_iteration for t in g["top_match"]) if complete else None
    return {
        "iterations": n,
        "drafted": drafted,
        "accepted_per_drafted": _ratio(sum(accepted), drafted),
        "dynatree_acceptance_rate": None if top is None else _ratio(top, drafted),
        "dynatree_mean_path_length": _ratio(sum(accepted), n),
        "ddtree_acceptance_length_histogram": hist,
        "ddtree_mean_acceptance_length": _ratio(sum(accepted) + n, n),
        "delayed_acceptance_by_depth": by_depth,
    }


def pooled_metrics(
    stats: Sequence[GenerationStats], prompt_tokens: Sequence[int]
) -> dict[str, int | float]:
    """Every metric of `METRICS` over a trial's generations, one per prompt of
    `prompt_tokens` tokens."""
    pool = Pool(tuple(stats), tuple(prompt_tokens))
    return {m.name: m.value(pool) for m in METRICS}


@dataclass(frozen=True)
class GenerationStats:
    method: str
    new_tokens: int
    prefill_s: float
    ttft_s: float
    total_s: float
    peak_memory_bytes: int
    iterations: tuple[IterationStats, ...]

    def summary(self) -> dict[str, float | int | str]:
        """The method and every per-generation metric of `METRICS`."""
        pool = Pool((self,))
        return {
            "method": self.method,
            **{m.name: m.value(pool) for m in METRICS if m.per_generation},
        }

    def to_dict(self) -> dict:
        """Summary, the papers' acceptance measures side by side (`acceptance`, see
        acceptance_definitions) and the per-iteration lists (JSON-ready)."""
        out = dict(self.summary())
        lists = (
            {k: [getattr(s, k) for s in self.iterations] for k in asdict(self.iterations[0])}
            if self.iterations
            else {}
        )
        out["acceptance"] = acceptance_definitions([lists])
        out["per_iteration"] = lists
        return out


def reset_peak_memory(device: torch.device) -> None:
    if device.type == "cuda":
        import torch  # lazy: torch

        torch.cuda.reset_peak_memory_stats(device)


def peak_memory(device: torch.device) -> int:
    if device.type == "cuda":
        import torch  # lazy: torch

        return int(torch.cuda.max_memory_allocated(device))
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux: KiB
