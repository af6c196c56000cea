"""Executors: `make_executor(name)` gives the in-process one (local.py) or the Ray one
(ray_executor.py); both run Jobs and report to a Sink (base.py)."""

from __future__ import annotations

from typing import Any

from engine.config import ConfigError
from orchestrator.run.executors.base import Job, Sink, Worker, worker_threads
from orchestrator.run.executors.local import LocalExecutor

__all__ = ["Job", "Sink", "Worker", "make_executor", "worker_threads"]


def make_executor(
    name: str,
    warmup: int = 0,
    max_attempts: int = 3,
    address: str | None = None,
    actors: int | None = None,
    accelerator: str = "auto",
    verbose: bool = False,
) -> Any:
    if name == "local":
        return LocalExecutor(warmup=warmup, threads=worker_threads(1))
    if name == "ray":
        from orchestrator.run.executors.ray_executor import RayExecutor  # lazy: Ray

        return RayExecutor(
            address=address,
            warmup=warmup,
            max_attempts=max_attempts,
            actors=actors,
            accelerator=accelerator,
            verbose=verbose,
        )
    raise ConfigError(f"unknown executor {name!r} (known: local, ray)")
