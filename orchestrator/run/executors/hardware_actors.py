"""The Ray actors of the jobs' hardware types (a sweep's `hardware:`, orchestrator/hardware.py):
how many actors each type gets and what each asks Ray for, so that Ray places a type's actors
only on nodes of that type (orchestrator/run/executors/ray_executor.py runs them).

- A GPU type X: `num_gpus=G, num_cpus=0, accelerator_type=X` per actor, G the GPUs one of
  its trials reserves (TrialConfig.gpus: a placement's gpus_per_trial, default 1).
  `accelerator_type` is Ray's own actor option for this: it adds a request for 0.001 of the
  node resource `accelerator_type:X`, which Ray sets on every node whose GPUs are of type X
  (and which a node may be given by hand: `ray start --resources '{"accelerator_type:X": 1}'`),
  so a node without it can never hold the actor, and a thousand actors fit on one node of X.
  The name is the cluster's own spelling of X (Ray matches resource names exactly). One actor
  per G GPUs of the nodes of type X, or `actors` of them when asked (the autoscaler adds nodes
  of X).
- `cpu`: `num_cpus=1` per actor, one per CPU of the cluster's nodes (or `actors`).

Every count is at most the jobs of its type and at least one. Plain data in, plain data out:
no Ray calls here (the executor passes `ray.nodes()`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from orchestrator.hardware import CPU, node_types, ray_spelling
from orchestrator.run.executors.base import Job


def hardware_actors(
    jobs: list[Job], nodes: list[dict[str, Any]], actors: int | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """(hardware type, actor options) for each actor to start, types in the jobs' order;
    nothing for jobs without a type (the executor's own plan places those)."""
    types = node_types(nodes)
    wanted = Counter(j.config.hardware for j in jobs if j.config.hardware is not None)
    out: list[tuple[str, dict[str, Any]]] = []
    for hardware, n_jobs in wanted.items():
        gpus = max(j.config.gpus for j in jobs if j.config.hardware == hardware)
        here = int(types.get(hardware, (hardware, 0.0))[1])  # its GPUs, or all CPUs for cpu
        per = 1 if hardware == CPU else gpus
        n = max(1, min(actors or here // per or 1, n_jobs))
        out += [(hardware, actor_options(hardware, types, gpus))] * n
    return out


def actor_options(
    hardware: str, types: dict[str, tuple[str, float]], gpus: int = 1
) -> dict[str, Any]:
    """What one actor of `hardware` asks Ray for (`TrialActor.options(**...)`): `gpus` GPUs of
    that type, or one CPU for `cpu`."""
    if hardware == CPU:
        return {"num_cpus": 1}
    return {"num_gpus": gpus, "num_cpus": 0, "accelerator_type": ray_spelling(hardware, types)}
