"""Ray executor: one long-lived actor per GPU (or per CPU slot), trials grouped by model pair.

- Actors: `num_gpus=1, num_cpus=0` each when the cluster has GPUs (Ray sets
  CUDA_VISIBLE_DEVICES, so "auto" device means the actor's own GPU), else `num_cpus=1` per
  CPU slot. `actors=N` asks for N of them (an autoscaling cluster adds nodes for them).
- Scheduling: an actor keeps drawing trials of the pair it has loaded; when that pair's queue
  is empty it moves to the pair with the most trials left, preferring pairs no other actor is
  on, so each actor loads each pair at most once. Each actor has `pipeline` trials queued so
  it never waits for the driver.
- Outcomes stream back through `ray.wait`; the driver (the sink) writes them, each with the
  Ray node id of the actor that ran it. A trial that raised comes back as a TrialFailure
  (recorded, the sweep goes on). A trial whose actor died (the actor, or its whole node) is put
  back in its pair's queue (up to `max_attempts` dispatches) and a replacement actor is asked
  for (GONE: its process killed by Ray's memory monitor or crashed counts as its death, since
  every trial queued on it would fail the same way); the other actors go on meanwhile, and the
  replacement takes trials once Ray has placed it (at once where a GPU is free, when the
  autoscaler adds a node, or never if the sweep ends first).
- Hardware types (a sweep's `hardware:`): each type's trials get actors of their own that Ray
  places only on nodes of that type (executors/hardware_actors.py: `accelerator_type=X`), and
  an actor only ever draws trials of its own type; trials without a type run as above.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import ray
from ray.exceptions import (
    NodeDiedError,
    OutOfMemoryError,
    RayActorError,
    RayError,
    WorkerCrashedError,
)

from engine.config import ConfigError
from orchestrator.records import TrialFailure
from orchestrator.run.executors.base import (
    Job,
    Sink,
    Worker,
    format_error,
    worker_threads,
)
from orchestrator.run.executors.hardware_actors import hardware_actors
from orchestrator.run.executors.trial_actor import TrialActor

REPO_ROOT = str(Path(__file__).resolve().parents[3])
SECRET_ENV = ("ORCH_DB_URL",)  # never handed to a Ray process started here
MAX_SPAWNS_PER_ACTOR = 10  # replacements of actors that die as they start, then give up
SPREAD_WAIT_S = 60.0  # at the start, wait this long for every actor (pairs spread over them)
PLACEMENT_TIMEOUT_S = 1800.0  # no actor placed for this long: give up (`orch resume` later)


def _start_reaper() -> None:
    """A process of its own that ends this local Ray's processes if the driver dies without
    shutting them down (SIGKILL): orchestrator/run/executors/reaper.py."""
    session = ray._private.worker._global_node.get_session_dir_path()
    me = psutil.Process()
    subprocess.Popen(
        [
            sys.executable,
            "-m",
            "orchestrator.run.executors.reaper",
            str(me.pid),
            repr(me.create_time()),
            session,
        ],
        cwd=REPO_ROOT,
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@dataclass
class Slot:
    actor: Any
    worker: Worker
    info: Any  # ObjectRef of actor.info(): resolves once Ray has placed the actor
    pair: tuple | None = None
    inflight: set = field(default_factory=set)
    alive: bool = True
    ready: bool = False  # placed and described
    hardware: str | None = None  # the hardware type of its trials (None: trials without one)

    @property
    def usable(self) -> bool:
        """Placed, described and not lost: takes trials."""
        return self.alive and self.ready


class ClusterError(ConfigError):
    """Ray could not be started or reached, or placed no actor: one line for the terminal (the
    sweep stays resumable: its unfinished trials stay pending)."""


class RayExecutor:
    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        warmup: int = 0,
        max_attempts: int = 3,
        actors: int | None = None,
        pipeline: int = 2,
        accelerator: str = "auto",
        verbose: bool = False,
        placement_timeout: float = PLACEMENT_TIMEOUT_S,
    ) -> None:
        if accelerator not in ("auto", "gpu", "cpu"):
            raise ConfigError(f"unknown accelerator {accelerator!r} (known: auto, gpu, cpu)")
        self.accelerator = accelerator
        self.verbose = verbose  # workers' stdout and stderr on the driver's terminal
        self.address, self.warmup, self.max_attempts = address, warmup, max_attempts
        self.actors, self.pipeline = actors, pipeline
        self.placement_timeout = placement_timeout
        self.slots: list[Slot] = []
        self._options: dict[str, Any] = {}
        self._typed: dict[str, dict[str, Any]] = {}  # hardware type -> its actors' options
        self._threads: int | None = None
        self._gpus_per_actor = 1  # GPUs each actor reserves (the jobs' placement)
        self._spawned = 0
        self._refs: dict[int, tuple[list, Any]] = {}
        self.load_counts: dict[str, dict[str, int]] = {}

    # ------------------------------------------------------------------ setup

    def _connect(self) -> bool:
        """Connect to the cluster (or start a local Ray); True when we started it."""
        if ray.is_initialized():
            return False
        hidden = {k: os.environ.pop(k) for k in SECRET_ENV if k in os.environ}
        try:
            # Ray's own lines (start-up, token authentication) go through the "ray" logger:
            # orchestrator.run.runlog sends them to the run log unless --verbose
            quiet = {"log_to_driver": self.verbose, "logging_level": logging.INFO}
            if self.address:
                ray.init(address=self.address, **quiet)
                return True
            path = os.pathsep.join(p for p in (REPO_ROOT, os.environ.get("PYTHONPATH")) if p)
            ray.init(
                include_dashboard=False,
                runtime_env={"env_vars": {"PYTHONPATH": path}},
                **quiet,
            )
            _start_reaper()
            return True
        except Exception as e:  # Ray raises plain Exception, ConnectionError, RuntimeError
            where = f"connect to Ray at {self.address}" if self.address else "start a local Ray"
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise ClusterError(
                f"could not {where}: {first} (`orch resume` runs the sweep once Ray starts)"
            ) from None
        finally:
            os.environ.update(hidden)

    def _plan(self, n_jobs: int) -> int:
        """How many actors and of which kind: GPU actors when asked for or when the cluster
        has GPUs now (auto), else one per CPU."""
        res = ray.cluster_resources()
        gpus, cpus = int(res.get("GPU", 0)), max(1, int(res.get("CPU", 1)))
        use_gpu = self.accelerator == "gpu" or (self.accelerator == "auto" and gpus > 0)
        if use_gpu and not (self.actors or gpus):
            raise ConfigError(
                "the Ray cluster has no GPUs yet: pass --actors N with "
                "--accelerator gpu so the autoscaler can add GPU nodes"
            )
        per = self._gpus_per_actor  # a sweep's placement.gpus_per_trial (engine/placement.py)
        if per > 1 and not use_gpu:
            raise ConfigError(
                f"placement.gpus_per_trial is {per} but the Ray cluster has no GPUs: run on GPU "
                "nodes (or --accelerator gpu with --actors N for the autoscaler)"
            )
        n = self.actors or (max(1, gpus // per) if use_gpu else cpus)
        n = max(1, min(n, n_jobs))
        self._options = {"num_gpus": per, "num_cpus": 0} if use_gpu else {"num_cpus": 1}
        self._threads = worker_threads(n, cpus)
        return n

    def _spawn(self, hardware: str | None = None) -> Slot:
        options = self._options if hardware is None else self._typed[hardware]
        actor = TrialActor.options(**options).remote(self.warmup, self._threads)
        name = f"actor{self._spawned}"
        self._spawned += 1
        return Slot(
            actor=actor,
            worker=Worker(name=name, host="?", gpu_id=None),
            info=actor.info.remote(),
            hardware=hardware,
        )

    def _spawn_all(self, jobs: list[Job]) -> list[Slot]:
        """The executor's own actors for the jobs without a hardware type (_plan), and each
        type's actors for its jobs (hardware_actors), all sharing the cluster's CPUs."""
        plain = sum(j.config.hardware is None for j in jobs)
        n = self._plan(plain) if plain else 0
        typed = hardware_actors(jobs, ray.nodes(), self.actors)
        if typed:
            self._typed = dict(typed)
            cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
            self._threads = worker_threads(n + len(typed), cpus)
        return [self._spawn() for _ in range(n)] + [self._spawn(h) for h, _ in typed]

    def _describe(self, timeout: float, every: bool = False) -> None:
        """Mark the slots whose actor Ray has placed within `timeout` s ready (wait for one,
        or for `every` one)."""
        waiting = [s for s in self.slots if s.alive and not s.ready]
        if not waiting:
            return
        placed, _ = ray.wait(
            [s.info for s in waiting], num_returns=len(waiting) if every else 1, timeout=timeout
        )
        for s in waiting:
            if s.info not in placed:
                continue
            try:
                info = ray.get(s.info)
            except RayError:  # died as it started (placed on a node that was dying): again
                s.alive = False
                if self._spawned < MAX_SPAWNS_PER_ACTOR * len(self.slots):
                    self.slots[self.slots.index(s)] = self._spawn(s.hardware)
                continue
            s.worker = Worker(name=s.worker.name, host=info["host"], gpu_id=info["gpu_id"])
            s.ready = True

    # ------------------------------------------------------------------ main loop

    def run(self, jobs: list[Job], sink: Sink) -> None:
        if not jobs:
            return
        started_ray = self._connect()
        self._gpus_per_actor = max(j.config.gpus for j in jobs)
        try:
            self.slots = self._spawn_all(jobs)
            # an actor Ray cannot place now (its node just died and the cluster does not know
            # yet, or the autoscaler is still adding one) must not hold up the others
            self._describe(timeout=SPREAD_WAIT_S, every=True)
            self._loop(jobs, sink)
            self.load_counts = self._loads()
        finally:  # also on Ctrl-C, when Ray's own processes may be going down already
            for s in self.slots:
                try:
                    ray.kill(s.actor)
                except Exception:  # noqa: BLE001 - already gone
                    pass
            if started_ray:
                ray.shutdown()

    def _loads(self) -> dict[str, dict[str, int]]:
        """Model-pair loads per live actor (name -> {"target/draft": loads})."""
        live = [s for s in self.slots if s.usable]
        try:
            counts = ray.get([s.actor.loads.remote() for s in live], timeout=60)
        except (RayError, TimeoutError):
            return {}
        return {s.worker.name: c for s, c in zip(live, counts)}

    def _loop(self, jobs: list[Job], sink: Sink) -> None:
        queues: dict[tuple, deque[Job]] = {}
        for job in jobs:
            queues.setdefault(job.config.pair_key, deque()).append(job)
        inflight: dict[Any, tuple[Slot, Job]] = {}
        stopping = False
        unplaced_since = time.monotonic()
        while True:
            self._describe(timeout=0)  # replacements Ray has placed meanwhile
            if any(s.usable for s in self.slots):
                unplaced_since = time.monotonic()
            if not stopping:
                self._dispatch(queues, inflight, sink)
            if not inflight:
                if stopping or not any(queues.values()):
                    return
                if time.monotonic() - unplaced_since > self.placement_timeout:
                    raise ClusterError(self._unplaced())
                self._describe(timeout=1.0)  # no actor placed: wait for one
                continue
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=1.0)
            for ref in ready:
                slot, job = inflight.pop(ref)
                slot.inflight.discard(ref)
                self._collect(ref, slot, job, queues, sink)
            if not stopping and sink.stop_requested():
                stopping = True

    def _unplaced(self) -> str:
        kinds = {s.hardware for s in self.slots}
        asked = "; ".join(
            ", ".join(f"{k} {v}" for k, v in options.items() if v)
            for options in [self._options] * (None in kinds)
            + [self._typed[h] for h in sorted(kinds - {None})]
        )
        free = ray.available_resources()
        has = ", ".join(f"{k} {free[k]:g}" for k in ("CPU", "GPU") if free.get(k))
        return (
            f"Ray placed none of the {len(self.slots)} actors in {self.placement_timeout:g} s "
            f"(each asks for {asked}; the cluster has {has or 'none of them'} free): "
            "`orch resume` runs the rest once it has room"
        )

    def _dispatch(self, queues, inflight, sink: Sink) -> None:
        for slot in self.slots:
            while slot.usable and len(slot.inflight) < self.pipeline:
                job = self._pick(slot, queues)
                if job is None:
                    break
                if not sink.start(job, slot.worker):
                    continue
                job.attempts += 1
                job.worker = slot.worker
                ref = slot.actor.run.remote(job.config, self._shared(job.prompts), job.acceptance)
                inflight[ref] = (slot, job)
                slot.inflight.add(ref)

    def _shared(self, prompts: list | None) -> Any:
        """Each distinct prompt list goes to the object store once."""
        if prompts is None:
            return None
        key = id(prompts)
        if key not in self._refs:
            self._refs[key] = (prompts, ray.put(prompts))
        return self._refs[key][1]

    def _pick(self, slot: Slot, queues: dict[tuple, deque[Job]]) -> Job | None:
        if slot.pair is not None and queues.get(slot.pair):
            return queues[slot.pair].popleft()
        left = [k for k, q in queues.items() if q and q[0].config.hardware == slot.hardware]
        if not left:
            return None
        taken = {s.pair for s in self.slots if s is not slot and s.alive}
        pair = max([k for k in left if k not in taken] or left, key=lambda k: len(queues[k]))
        slot.pair = pair
        return queues[pair].popleft()

    def _collect(self, ref, slot: Slot, job: Job, queues, sink: Sink) -> None:
        try:
            out = ray.get(ref)
        except GONE as e:
            self._actor_died(slot, e)
            error = (
                f"worker {slot.worker.name} on {slot.worker.host} (gpu "
                f"{slot.worker.gpu_id}) died: {_first_line(e)}"
            )
            if job.attempts >= self.max_attempts:
                now = time.time()
                sink.failed(
                    job,
                    TrialFailure(
                        job.config.config_hash,
                        f"{error} (attempt {job.attempts} of {self.max_attempts})",
                        slot.worker.host,
                        slot.worker.gpu_id,
                        now,
                        now,
                    ),
                )
            else:
                sink.retry(job, error)
                queues.setdefault(job.config.pair_key, deque()).appendleft(job)
            return
        except RayError as e:  # the task itself could not run (e.g. unpicklable input)
            now = time.time()
            sink.failed(
                job,
                TrialFailure(
                    job.config.config_hash,
                    format_error(e),
                    slot.worker.host,
                    slot.worker.gpu_id,
                    now,
                    now,
                ),
            )
            return
        if isinstance(out, TrialFailure):
            sink.failed(job, out)
        else:
            sink.done(job, out)

    def _actor_died(self, slot: Slot, e: Exception) -> None:
        if not slot.alive:
            return
        slot.alive = False
        self.slots[self.slots.index(slot)] = self._spawn(slot.hardware)  # placed when Ray can


# the errors of a trial whose actor is gone (killed, out of memory, crashed, its node lost):
# the actor is replaced and the trial goes back in the queue. Ray raises OutOfMemoryError (not
# a RayActorError) for every call on an actor its memory monitor killed, so before this, one
# out-of-memory kill failed all the trials that were left (47 of a 48-trial resume, 2026-11-28).
GONE = (RayActorError, OutOfMemoryError, WorkerCrashedError, NodeDiedError)


def _first_line(e: Exception) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return lines[0] if lines else type(e).__name__
