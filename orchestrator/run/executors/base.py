"""What every executor shares: a Job, the Worker it ran on, the Sink its outcomes go to.

Executors run jobs and report each outcome to a sink; they never touch the database.

The driver (orchestrator.run.runner) owns the sink: `start` claims a trial in the database (False:
skip it, e.g. cancelled meanwhile), `done`/`failed` record it, `retry` puts a trial whose
worker died back to pending, `stop_requested` is polled between trials (orch cancel).
"""

from __future__ import annotations

import os
import traceback
from dataclasses import dataclass, field
from typing import Protocol

from engine.config import ConfigError
from engine.model_names import TINY_MODELS
from orchestrator.records import TrialConfig, TrialFailure, TrialResult

MAX_ERROR_CHARS = 4000


@dataclass(frozen=True)
class Worker:
    name: str  # "local", "actor0", ...
    host: str
    gpu_id: str | None


@dataclass
class Job:
    trial_id: int
    config: TrialConfig
    attempts: int = 0  # dispatches so far, this one included once started
    prompts: list | None = None  # shipped by the driver so workers need no data files
    # a Sequoia trial's measured acceptance profile, attached by the driver from the database
    # (orchestrator/acceptance.py) so workers need none
    acceptance: tuple[float, ...] | None = None
    worker: Worker | None = field(default=None, compare=False)


class Sink(Protocol):
    def start(self, job: Job, worker: Worker) -> bool: ...
    def done(self, job: Job, result: TrialResult) -> None: ...
    def failed(self, job: Job, failure: TrialFailure) -> None: ...
    def retry(self, job: Job, error: str) -> None: ...
    def stop_requested(self) -> bool: ...


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask; the machine's count elsewhere)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def worker_threads(workers: int, cpus: int | None = None) -> int:
    """torch threads of each of `workers` workers sharing `cpus` CPUs (default: this
    machine's): the Ray actors of one machine split its CPUs, the local executor (one worker)
    takes them all."""
    return max(1, (available_cpus() if cpus is None else cpus) // max(1, workers))


def trial_threads(config: TrialConfig, threads: int) -> int:
    """The torch threads one trial runs with: `threads`, but one for the built-in tiny models,
    whose tensors are too small to split (a quickstart trial on a loaded 2-core machine: 3.4 s
    with one thread, 29 s with two; torch's default is one per core)."""
    tiny = config.target in TINY_MODELS and config.draft in (*TINY_MODELS, "none")
    return 1 if tiny else threads


def format_error(e: BaseException) -> str:
    """User errors as their one line; anything else with its traceback (bounded)."""
    if isinstance(e, ConfigError):
        return f"{type(e).__name__}: {e}"
    text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    return text if len(text) <= MAX_ERROR_CHARS else "...\n" + text[-MAX_ERROR_CHARS:]
