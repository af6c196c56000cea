"""The Ray actor that runs trials (orchestrator/run/executors/ray_executor.py starts and
schedules them): one per GPU or CPU slot, holding one loaded model pair at a time."""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from typing import Any

import ray

from orchestrator.records import TrialConfig, TrialFailure, TrialResult
from orchestrator.run import trial
from orchestrator.run.executors.base import format_error, trial_threads


@ray.remote(max_restarts=0, max_task_retries=0)
class TrialActor:
    """Holds one loaded model pair at a time (orchestrator.run.trial's cache) and runs trials.

    Ray ships this class by value: a module-level object its methods name travels as a copy
    of the driver's, so they read the worker's own trial cache through the module
    (`trial.LOADS`, `trial.run_trial`), which travels by reference."""

    def __init__(self, warmup: int, threads: int | None) -> None:
        import torch  # lazy: torch

        self.threads = threads or torch.get_num_threads()
        torch.set_num_threads(self.threads)
        gpus = ray.get_gpu_ids()
        self.gpu_id = ",".join(str(g) for g in gpus) or None
        if self.gpu_id:
            os.environ["ORCH_GPU_ID"] = self.gpu_id
        self.host = socket.gethostname()
        self.node = ray.get_runtime_context().get_node_id()
        self.warmup = warmup

    def info(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "node": self.node,
            "gpu_id": self.gpu_id,
            "pid": os.getpid(),
            "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
        }

    def run(
        self, config: TrialConfig, prompts: list | None, acceptance: tuple | None = None
    ) -> TrialResult | TrialFailure:
        import torch  # lazy: torch

        torch.set_num_threads(trial_threads(config, self.threads))
        started = time.time()
        try:
            result = trial.run_trial(
                config, prompts=prompts, warmup=self.warmup, acceptance=acceptance
            )
            return dataclasses.replace(result, node=self.node)
        except Exception as e:  # noqa: BLE001 - e.g. out of memory: the trial failed
            _free_cuda()
            return TrialFailure(
                config.config_hash,
                format_error(e),
                self.host,
                self.gpu_id,
                started,
                time.time(),
                node=self.node,
            )

    def loads(self) -> dict[str, int]:
        return {"/".join(k[:2]): n for k, n in trial.LOADS.items()}


def _free_cuda() -> None:
    import torch  # lazy: torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()
