"""In-process executor: trials one after another in the driver process, grouped by pair.

It is one worker with the machine to itself: torch runs each trial with `threads` threads
(all CPUs by default, one for the built-in tiny models: executors/base.py trial_threads),
not torch's default, which is slow on a loaded machine; the driver's own count is put back
afterwards."""

from __future__ import annotations

import socket
import time

from orchestrator.records import TrialFailure
from orchestrator.run.executors.base import (
    Job,
    Sink,
    Worker,
    format_error,
    trial_threads,
    worker_threads,
)
from orchestrator.run.trial import run_trial


class LocalExecutor:
    name = "local"

    def __init__(self, warmup: int = 0, threads: int | None = None) -> None:
        self.warmup = warmup
        self.threads = worker_threads(1) if threads is None else threads

    def run(self, jobs: list[Job], sink: Sink) -> None:
        import torch  # lazy: torch

        before = torch.get_num_threads()
        try:
            self._run(jobs, sink)
        finally:
            torch.set_num_threads(before)

    def _run(self, jobs: list[Job], sink: Sink) -> None:
        import torch  # lazy: torch

        gpu = "0" if torch.cuda.is_available() else None
        worker = Worker(name="local", host=socket.gethostname(), gpu_id=gpu)
        order = {k: i for i, k in enumerate(dict.fromkeys(j.config.pair_key for j in jobs))}
        for job in sorted(jobs, key=lambda j: order[j.config.pair_key]):  # stable: keeps order
            if sink.stop_requested():
                return
            if not sink.start(job, worker):
                continue
            job.attempts += 1
            job.worker = worker
            torch.set_num_threads(trial_threads(job.config, self.threads))
            started = time.time()
            try:
                result = run_trial(
                    job.config, prompts=job.prompts, warmup=self.warmup, acceptance=job.acceptance
                )
            except Exception as e:  # noqa: BLE001 - recorded as the trial's failure
                sink.failed(
                    job,
                    TrialFailure(
                        job.config.config_hash,
                        format_error(e),
                        worker.host,
                        gpu,
                        started,
                        time.time(),
                    ),
                )
            else:
                sink.done(job, result)
