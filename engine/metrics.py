"""Exact per-generation metrics from per-iteration records.

Definitions (shared by every paper's tables):
- throughput: new tokens / wall time of the whole generation (prefill included), tokens/s.
- acceptance rate: accepted draft tokens / drafted tokens (tree nodes below the root).
- tokens per iteration (block efficiency, tau): new tokens / target forwards.
- mean accepted length: accepted draft tokens per iteration (tokens per iteration minus the
  bonus token, up to truncation at the end).
- TTFT: time from the start until the first new token is known (prefill + first iteration).
- TPOT: (total - TTFT) / (new tokens - 1).
- peak memory: CUDA max allocated bytes on GPU; on CPU the process's peak RSS (ru_maxrss,
  a process-lifetime peak).
- time split: draft (tree building incl. draft forwards), target (tree forward), verify,
  bookkeeping (cache compaction, committing); forward_s is the time inside model forwards only.
"""

from __future__ import annotations

import resource
from dataclasses import asdict, dataclass

import torch


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
        it = self.iterations
        n_it = len(it)
        drafted = sum(s.tree_size - 1 for s in it)
        accepted = sum(s.accepted for s in it)
        forward = self.prefill_s + sum(s.draft_forward_s + s.target_forward_s for s in it)
        return {
            "method": self.method,
            "new_tokens": self.new_tokens,
            "iterations": n_it,
            "throughput": self.new_tokens / self.total_s if self.total_s > 0 else 0.0,
            "acceptance_rate": accepted / drafted if drafted else 0.0,
            "tokens_per_iteration": self.new_tokens / n_it if n_it else 0.0,
            "mean_accepted_length": accepted / n_it if n_it else 0.0,
            "mean_tree_size": sum(s.tree_size for s in it) / n_it if n_it else 0.0,
            "ttft_s": self.ttft_s,
            "tpot_s": ((self.total_s - self.ttft_s) / (self.new_tokens - 1)
                       if self.new_tokens > 1 else 0.0),
            "total_s": self.total_s,
            "prefill_s": self.prefill_s,
            "draft_s": sum(s.draft_s for s in it),
            "target_s": sum(s.target_s for s in it),
            "verify_s": sum(s.verify_s for s in it),
            "bookkeeping_s": sum(s.bookkeeping_s for s in it),
            "forward_s": forward,
            "overhead_share": 1.0 - forward / self.total_s if self.total_s > 0 else 0.0,
            "peak_memory_bytes": self.peak_memory_bytes,
        }

    def to_dict(self) -> dict:
        """Summary plus the per-iteration lists (JSON-ready)."""
        out = dict(self.summary())
        out["per_iteration"] = {k: [getattr(s, k) for s in self.iterations]
                                for k in asdict(self.iterations[0])} if self.iterations else {}
        return out


def reset_peak_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux: KiB
