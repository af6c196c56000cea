"""Submit and resume sweeps: validate, write trials, run them on an executor, record outcomes.

Only this driver writes to the database. Order of `submit`: the whole sweep file is validated
(and expanded) first, then the database is opened, then trials are written, then models load
in the executor, so bad input never leaves rows behind. Ctrl-C puts the trials in flight back
to pending (exit 130); a killed driver leaves them running, and the next `resume` or `submit`
(once the driver is seen dead: same host and no such process, or no heartbeat for
STALE_DRIVER_S) runs them again. The database keeps one result per config hash either way.
"""

from __future__ import annotations

import hashlib
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from db.models import SweepStatus
from orchestrator.executors import Job, Worker, make_executor
from orchestrator.preflight import check_run
from orchestrator.records import TrialFailure, TrialResult
from orchestrator.spec import load_sweep
from orchestrator.store import OPEN, Store
from orchestrator.trial import code_version

HEARTBEAT_S = 10.0
CANCEL_POLL_S = 2.0


class Interrupted(Exception):
    """Ctrl-C: the in-flight trials went back to pending."""

    def __init__(self, sweep: str, pending: int) -> None:
        super().__init__(
            f"interrupted: {pending} trials of sweep {sweep!r} left pending; "
            f"run `orch resume {sweep}`"
        )


@dataclass(frozen=True)
class RunSummary:
    sweep: str
    total: int  # trials in the sweep
    new: int  # trials this submission added to the database
    ran: int  # trials dispatched by this run
    done: int
    failed: int
    retried: int
    status: SweepStatus  # the sweep's status afterwards
    wall_s: float


@dataclass(frozen=True)
class RunOptions:
    executor: str = "ray"
    address: str | None = None
    actors: int | None = None
    accelerator: str = "auto"  # ray: gpu | cpu actors, auto: gpu when the cluster has GPUs
    retry_failed: bool = False
    force: bool = False
    progress: bool | None = None  # None: when stderr is a terminal


class DriverSink:
    """Writes each outcome as it arrives, keeps the progress bar and the cancel check."""

    def __init__(
        self, store: Store, sweep_id: int, total: int, name: str, progress: bool | None
    ) -> None:
        from tqdm import tqdm

        self.store, self.sweep_id = store, sweep_id
        self.in_flight: set[int] = set()
        self.ran = self.done_n = self.failed_n = self.retried = 0
        self.write_s: list[float] = []  # database time per outcome (bench_orch reads it)
        self._last_poll = 0.0
        self.bar = tqdm(
            total=total,
            desc=name,
            unit="trial",
            file=sys.stderr,
            disable=(not sys.stderr.isatty()) if progress is None else not progress,
            dynamic_ncols=True,
        )

    def start(self, job: Job, worker: Worker) -> bool:
        if not self.store.mark_running(job.trial_id, worker.host, worker.gpu_id):
            self.bar.update(1)
            return False
        self.in_flight.add(job.trial_id)
        self.ran += 1
        return True

    def done(self, job: Job, result: TrialResult) -> None:
        t0 = time.perf_counter()
        self.store.record_result(job.trial_id, result)
        self.write_s.append(time.perf_counter() - t0)
        self.in_flight.discard(job.trial_id)
        self.done_n += 1
        self._tick()

    def failed(self, job: Job, failure: TrialFailure) -> None:
        self.store.record_failure(job.trial_id, failure)
        self.in_flight.discard(job.trial_id)
        self.failed_n += 1
        self._tick()

    def retry(self, job: Job, error: str) -> None:
        self.store.requeue(job.trial_id, error)
        self.in_flight.discard(job.trial_id)
        self.retried += 1

    def stop_requested(self) -> bool:
        now = time.monotonic()
        if now - self._last_poll < CANCEL_POLL_S:
            return False
        self._last_poll = now
        return self.store.sweep_status(self.sweep_id) == SweepStatus.CANCELLED

    def _tick(self) -> None:
        self.bar.set_postfix(done=self.done_n, failed=self.failed_n, refresh=False)
        self.bar.update(1)


def submit(
    path: str | Path, url: str | None, opts: RunOptions, log: Callable[[str], None] = print
) -> RunSummary:
    sweep, trials = load_sweep(path)  # everything validated before the database is touched
    check_run(opts, {t.device for t in trials})  # and how it will run: Ray, GPUs, devices
    store = Store(url)
    try:
        store.check_driver(sweep.name, force=opts.force)  # before anything is written
        info = store.submit(sweep.name, sweep.to_dict(), trials, code_version())
        for d in {d.name for d in sweep.datasets}:
            store.upsert_dataset(dataset_row(d))
        log(
            f"sweep {sweep.name!r} in {store.display_url}: {info.total} trials "
            f"({info.new} new, {info.done} already done)"
        )
        return run_sweep(store, info.sweep_id, opts, new=info.new, log=log)
    finally:
        store.close()


def resume(
    name: str | None, url: str | None, opts: RunOptions, log: Callable[[str], None] = print
) -> RunSummary:
    store = Store(url, mode="write")
    try:
        sweep = store.sweep(name)
        check_run(opts, {sweep["spec"].get("device", "auto")})
        log(f"resuming sweep {sweep['name']!r} in {store.display_url}")
        return run_sweep(store, sweep["id"], opts, new=0, log=log)
    finally:
        store.close()


def run_sweep(
    store: Store, sweep_id: int, opts: RunOptions, new: int = 0, log: Callable[[str], None] = print
) -> RunSummary:
    """Claim the sweep, run its unfinished trials, release it. On any exit path (Ctrl-C, an
    error) the trials in flight go back to pending and the driver claim is dropped."""
    start = time.perf_counter()
    sweep = store.sweep(sweep_id=sweep_id)
    spec = sweep["spec"]
    store.claim_driver(sweep_id, force=opts.force)
    sink: DriverSink | None = None
    stop = threading.Event()
    interrupted = False
    try:
        rows = store.runnable(sweep_id, retry_failed=opts.retry_failed)
        jobs = [Job(trial_id=i, config=c, attempts=a) for i, c, a in rows]
        log(f"{len(jobs)} to run on the {opts.executor} executor" if jobs else "nothing to run")
        if jobs:
            _attach_prompts(jobs)
            executor = make_executor(
                opts.executor,
                warmup=spec.get("warmup", 0),
                max_attempts=spec.get("max_attempts", 3),
                address=opts.address,
                actors=opts.actors,
                accelerator=opts.accelerator,
            )
            sink = DriverSink(store, sweep_id, len(jobs), sweep["name"], opts.progress)
            threading.Thread(target=_heartbeat, args=(store, sweep_id, stop), daemon=True).start()
            try:
                executor.run(jobs, sink)
            finally:
                sink.bar.close()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        stop.set()
        if sink is not None and sink.in_flight:
            store.reset_running(sink.in_flight)
        status = store.release_driver(sweep_id)
    counts = store.counts(sweep["name"])[0]
    if interrupted:
        raise Interrupted(sweep["name"], sum(counts[t.value] for t in OPEN))
    return RunSummary(
        sweep=sweep["name"],
        total=counts["trials"],
        new=new,
        ran=sink.ran if sink else 0,
        done=sink.done_n if sink else 0,
        failed=sink.failed_n if sink else 0,
        retried=sink.retried if sink else 0,
        status=status,
        wall_s=time.perf_counter() - start,
    )


def _heartbeat(store: Store, sweep_id: int, stop: threading.Event) -> None:
    while not stop.wait(HEARTBEAT_S):
        try:
            store.heartbeat(sweep_id)
        except Exception:  # noqa: BLE001 - a missed heartbeat is harmless
            pass


def _attach_prompts(jobs: list[Job]) -> None:
    """Load each dataset slice once in the driver and ship the prompts with the jobs."""
    from engine.datasets import load_prompts

    cache: dict[tuple, list] = {}
    for job in jobs:
        c = job.config
        key = (c.dataset, c.prompts, c.category)
        if key not in cache:
            cache[key] = load_prompts(c.dataset, n=c.prompts, category=c.category)
        job.prompts = cache[key]


def dataset_row(name: str) -> dict[str, Any]:
    from engine.datasets import dataset_info

    info = dataset_info(name)
    sha = None
    if info["path"]:
        sha = hashlib.sha256(Path(info["path"]).read_bytes()).hexdigest()
    return {
        "name": name,
        "file": info["file"],
        "items": info["items"],
        "categories": info["categories"],
        "chat": info["chat"],
        "sha256": sha,
    }
