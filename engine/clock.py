"""A generation's timestamps, taken without synchronising the device (issue 22).

Every time a trial reports (prefill, each iteration's drafting, target forward, verification
and bookkeeping, the time inside each model forward) is a difference of two *stamps*. On a CPU
a stamp is the host clock, which is the device's: the CPU runs each op when Python calls it.
On CUDA the host only queues the work, so a host clock read says when the work was queued, not
when it ran; timing with it needs a `torch.cuda.synchronize` at every stamp, two per model
forward, and each one stops the host from queueing the next forward while the GPU runs the
current one. Here a CUDA stamp is a `torch.cuda.Event` recorded on the current stream: it
costs no synchronisation, and the differences come from the GPU's own timeline when the
generation ends (`seconds`: one synchronisation, on the last event). The iteration's reads
(the accept decision) stay its only synchronisations.

    clock = Clock(device)
    a = clock.stamp(); ... ; b = clock.stamp()     # indices
    seconds = clock.seconds()                      # [stamps] seconds since the first stamp
    seconds[b] - seconds[a]

`SYNCHRONISE = True` restores the timing of the sessions before 2026-11-27's eighth: every
CUDA stamp synchronises, then reads the host clock (stage times on the host's timeline; what
bench/gpu.py runs beside the events to measure what the synchronisations cost).
"""

from __future__ import annotations

import contextlib
import time

import torch

SYNCHRONISE = False  # CUDA stamps synchronise and read the host clock (see the docstring)


class Clock:
    """Stamps of one generation on one device (see the module docstring)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.events = device.type == "cuda" and not SYNCHRONISE  # fixed for the clock's life
        self._first = None  # the first stamp (host seconds, or its event): the time origin
        self._pending: list = []  # stamps not yet resolved (host seconds, or recorded events)
        self._seconds: list[float] = []  # the resolved stamps, seconds after the first

    def stamp(self) -> int:
        """A timestamp of the work queued so far; its index into `seconds()`."""
        if self.events:
            now = torch.cuda.Event(enable_timing=True)
            now.record()
        else:
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            now = time.perf_counter()
        if self._first is None:
            self._first = now
        self._pending.append(now)
        return len(self._seconds) + len(self._pending) - 1

    def seconds(self) -> list[float]:
        """Every stamp's time in seconds after the first stamp; on CUDA events, waits for the
        last one (the only synchronisation timing costs) and lets go of the resolved events
        (a CUDA event destroyed during a graph capture breaks it: engine/runtime/cuda_graphs.py)."""
        new, self._pending = self._pending, []
        if new and self.events:
            new[-1].synchronize()
            self._seconds += [self._first.elapsed_time(e) / 1e3 for e in new]
        elif new:
            self._seconds += [t - self._first for t in new]
        return self._seconds

    def spans(self, spans: list[tuple[int, int]]) -> float:
        """The summed seconds of (start, end) stamp pairs (a model's forwards)."""
        at = self.seconds()
        return sum(at[b] - at[a] for a, b in spans)


@contextlib.contextmanager
def synchronised():
    """Clocks made inside time with SYNCHRONISE on (the earlier timing, for a side-by-side)."""
    global SYNCHRONISE
    saved, SYNCHRONISE = SYNCHRONISE, True
    try:
        yield
    finally:
        SYNCHRONISE = saved
