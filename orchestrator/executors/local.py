"""In-process executor: trials one after another in the driver process, grouped by pair."""

from __future__ import annotations

import socket
import time

from orchestrator.executors import Job, Sink, Worker, format_error
from orchestrator.records import TrialFailure
from orchestrator.trial import run_trial


class LocalExecutor:
    name = "local"

    def __init__(self, warmup: int = 0) -> None:
        self.warmup = warmup

    def run(self, jobs: list[Job], sink: Sink) -> None:
        import torch

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
            started = time.time()
            try:
                result = run_trial(job.config, prompts=job.prompts, warmup=self.warmup)
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
