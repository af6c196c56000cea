"""Submit and resume sweeps: validate, write trials, run them on an executor, record outcomes.

Drivers write to the database, workers never do. Order of `submit`: the whole sweep file is
validated (and expanded) first, then the database is opened, then trials are written, then
models load in the executor, so bad input never leaves rows behind.

Any number of drivers may run one sweep, or sweeps sharing configs, at the same time: each
claims trials under a lease its heartbeat renews (orchestrator.store), runs them, then waits
for the sweep's trials other drivers hold, taking over those whose lease runs out, until every
trial is done or failed or the sweep is cancelled. Ctrl-C puts the trials in flight back to
pending (exit 130); a killed driver leaves them running, and the next driver takes them over
once their lease runs out (at once on the same host, where it sees the process is gone).
A lost database connection is retried for `db_retry_s` seconds while the run waits; after
that the driver stops with one line and the sweep can be resumed. The database keeps one
result per config hash whatever happens.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from tqdm import tqdm

from db.models import SweepStatus, TrialStatus
from engine.config import ConfigError
from orchestrator.only import Only, check_only, matches
from orchestrator.records import TrialFailure, TrialResult
from orchestrator.run.acceptance import acceptance_first, attach_acceptance, with_acceptance
from orchestrator.run.executors import Job, Worker, make_executor
from orchestrator.run.job_prompts import attach_prompts, dataset_row, file_row
from orchestrator.run.preflight import (
    check_checkpoints,
    check_gpus_per_trial,
    check_run,
    place_trials,
)
from orchestrator.run.runlog import run_log
from orchestrator.run.version import code_version
from orchestrator.spec import load_sweep
from orchestrator.spec.scale import provenance
from orchestrator.store import DB_RETRY_S, Store
from orchestrator.store.leases import LEASE_S
from orchestrator.store.sql import OPEN, StoreError

CANCEL_POLL_S = 2.0  # how often a driver reads its sweep's status (cancel) and, idle, waits
# Test hook, "N:PATH": after claiming its Nth trial the driver creates PATH and waits while
# it exists, so that a test can kill or interrupt it at a known point.
PAUSE_ENV = "ORCH_TEST_PAUSE"


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
    pending: int = 0  # trials of the sweep still pending afterwards (e.g. left out by --only)


@dataclass(frozen=True)
class RunOptions:
    executor: str = "ray"
    address: str | None = None
    actors: int | None = None
    accelerator: str = "auto"  # ray: gpu | cpu actors, auto: gpu when the cluster has GPUs
    retry_failed: bool = False
    lease_s: float = LEASE_S  # this driver's claim on a trial, renewed by heartbeat
    db_retry_s: float = DB_RETRY_S  # how long a lost database is retried before stopping
    progress: bool | None = None  # None: when stderr is a terminal
    verbose: bool = False  # library warnings and logs on the terminal too, not only the run log
    only: tuple[Only, ...] = ()  # run only the trials matching these (orchestrator/only.py)


class DriverSink:
    """Writes each outcome as it arrives, keeps the progress bar and the cancel check."""

    def __init__(self, store: Store, sweep_id: int, name: str, progress: bool | None) -> None:
        self.store, self.sweep_id = store, sweep_id
        self.in_flight: set[int] = set()
        self.ran = self.done_n = self.failed_n = self.retried = 0
        self.write_s: list[float] = []  # database time per outcome (bench_orch reads it)
        self.cancelled = False
        self._last_poll = 0.0
        self._pause = _pause_point()
        self.bar = tqdm(
            total=0,
            desc=name,
            unit="trial",
            file=sys.stderr,
            disable=(not sys.stderr.isatty()) if progress is None else not progress,
            dynamic_ncols=True,
        )

    def add(self, n: int) -> None:
        self.bar.total += n
        self.bar.refresh()

    def start(self, job: Job, worker: Worker) -> bool:
        if not self.store.mark_running(job.trial_id, worker.host, worker.gpu_id):
            self.bar.update(1)  # another driver holds it, or it was cancelled
            return False
        self.in_flight.add(job.trial_id)
        self.ran += 1
        if self._pause is not None and self.ran == self._pause[0]:
            _hold(self._pause[1])
        return True

    def done(self, job: Job, result: TrialResult) -> None:
        t0 = time.perf_counter()
        self.store.record_result(job.trial_id, result)
        self.write_s.append(time.perf_counter() - t0)
        self.in_flight.discard(job.trial_id)
        self.done_n += 1
        self._tick()

    def failed(self, job: Job, failure: TrialFailure) -> None:
        if self.store.record_failure(job.trial_id, failure):
            self.failed_n += 1
        self.in_flight.discard(job.trial_id)
        self._tick()

    def retry(self, job: Job, error: str) -> None:
        self.store.requeue(job.trial_id, error)
        self.in_flight.discard(job.trial_id)
        self.retried += 1

    def stop_requested(self) -> bool:
        now = time.monotonic()
        if not self.cancelled and now - self._last_poll >= CANCEL_POLL_S:
            self._last_poll = now
            self.cancelled = self.store.sweep_status(self.sweep_id) == SweepStatus.CANCELLED
        return self.cancelled

    def _tick(self) -> None:
        self.bar.set_postfix(done=self.done_n, failed=self.failed_n, refresh=False)
        self.bar.update(1)


def open_store(
    url: str | None, opts: RunOptions, log: Callable[[str], None], mode: str = "create"
) -> Store:
    return Store(url, mode=mode, lease_s=opts.lease_s, retry_s=opts.db_retry_s, on_retry=log)


def submit(
    path: str | Path,
    url: str | None,
    opts: RunOptions,
    log: Callable[[str], None] = print,
    replace: bool = False,
    rerun: bool = False,
    scaled: bool = False,
) -> RunSummary:
    """`replace`: the file's trials become the sweep's even where they differ (else a
    changed trial set is refused); `rerun`: its done trials are measured again (Store.submit)."""
    # everything validated before the database is touched; for a remote cluster (an address)
    # model folders are checked where they load, on the workers; scaled: the file's scale: block
    sweep, trials = load_sweep(path, local_models=opts.address is None, scaled=scaled)
    if opts.only:
        check_only(opts.only, trials, sweep.name)
    runs = [t for t in trials if matches(t, opts.only)]  # and how they will run: Ray, GPUs,
    check_run(opts, {t.device for t in runs}, {t.hardware for t in runs})  # devices, hardware
    check_gpus_per_trial(opts, runs)  # a placement's GPUs per trial (engine/placement.py)
    if opts.address is None:  # a remote cluster's workers read their own ORCH_HOME
        check_checkpoints(trials)  # learned components named by the methods: trained here
    trials = place_trials(trials, opts)  # device and dtype `auto` resolved: part of the hash
    store = open_store(url, opts, log)
    try:
        spec = {**sweep.to_dict(), "source": provenance(path, scaled)}
        info = store.submit(sweep.name, spec, trials, code_version(), replace=replace, rerun=rerun)
        if info.added or info.removed or info.rerun:
            log(f"sweep {sweep.name!r}: {submit_changes(info)}")
        for d in {d.name: d for d in sweep.datasets}.values():
            store.upsert_dataset(file_row(d) if d.sha256 else dataset_row(d.name))
        log(
            f"sweep {sweep.name!r} in {store.display_url}: {info.total} trials "
            f"({info.new} new, {info.done} already done)"
        )
        with run_log(sweep.name, opts.verbose, opts.executor) as path:
            log(f"run log: {path}")
            return run_sweep(store, info.sweep_id, opts, new=info.new, log=log)
    finally:
        store.close()


def submit_changes(info: Any) -> str:
    """What --replace and --rerun changed (a SubmitInfo), for the submit line."""
    out = []
    if info.added or info.removed:
        deleted = f" ({info.deleted} deleted with their results)" if info.deleted else ""
        out.append(f"trials replaced: {info.added} added, {info.removed} removed{deleted}")
    if info.rerun:
        out.append(f"{info.rerun} done trials to measure again")
    return "; ".join(out)


def resume(
    name: str | None, url: str | None, opts: RunOptions, log: Callable[[str], None] = print
) -> RunSummary:
    store = open_store(url, opts, log, mode="write")
    try:
        sweep = store.sweep(name)
        if opts.only:
            check_only(opts.only, store.configs(sweep["id"]), sweep["name"])
        hardware = sweep["spec"].get("hardware", [])
        if opts.only and hardware:  # the types of the trials --only picks
            hardware = {c.hardware for c in store.configs(sweep["id"]) if matches(c, opts.only)}
        check_run(opts, {sweep["spec"].get("device", "auto")}, hardware)
        log(f"resuming sweep {sweep['name']!r} in {store.display_url}")
        with run_log(sweep["name"], opts.verbose, opts.executor) as path:
            log(f"run log: {path}")
            return run_sweep(store, sweep["id"], opts, new=0, log=log)
    finally:
        store.close()


def run_sweep(
    store: Store, sweep_id: int, opts: RunOptions, new: int = 0, log: Callable[[str], None] = print
) -> RunSummary:
    """Run the sweep's unfinished trials beside any other drivers, then leave it. On Ctrl-C
    or an error the trials in flight go back to pending; when the database stays lost, they
    stay running until their lease runs out."""
    start = time.perf_counter()
    sweep = store.sweep(sweep_id=sweep_id)
    name = sweep["name"]
    store.begin_run(sweep_id, opts.only)
    sink = DriverSink(store, sweep_id, name, opts.progress)
    stop = threading.Event()
    beat = threading.Thread(target=_heartbeat, args=(store, sweep_id, stop), daemon=True)
    beat.start()
    interrupted, lost = False, None
    try:
        _drive(store, sweep_id, sweep["spec"], opts, sink, log)
    except KeyboardInterrupt:
        interrupted = True
    except StoreError as e:
        lost = e
    finally:
        stop.set()
        beat.join(timeout=60)
        sink.bar.close()
        status = _leave(store, sweep_id, sink, retry=not (interrupted or lost))
    if lost is not None:
        held = f"{len(sink.in_flight)} trials in flight go back once their lease runs out; "
        raise StoreError(
            f"{lost}; stopped: {held if sink.in_flight else ''}run `orch resume {name}`"
        )
    counts = store.counts(name)[0]
    if interrupted:
        raise Interrupted(name, sum(counts[t.value] for t in OPEN))
    return RunSummary(
        sweep=name,
        total=counts["trials"],
        new=new,
        ran=sink.ran,
        pending=counts[TrialStatus.PENDING.value],
        done=sink.done_n,
        failed=sink.failed_n,
        retried=sink.retried,
        status=status,
        wall_s=time.perf_counter() - start,
    )


def _drive(
    store: Store,
    sweep_id: int,
    spec: dict[str, Any],
    opts: RunOptions,
    sink: DriverSink,
    log: Callable[[str], None],
) -> None:
    """Claim and run the runnable trials, pass after pass; between passes wait for trials
    other drivers hold. Ends when none is left, or on cancel."""
    executor = None
    prompts: dict[tuple, list] = {}
    first, waiting = True, False
    while store.sweep_status(sweep_id) != SweepStatus.CANCELLED:
        rows = store.runnable(sweep_id, retry_failed=opts.retry_failed, reopen=first)
        rows = with_acceptance([r for r in rows if matches(r[1], opts.only)], rows)
        if first:
            log(
                f"{len(rows)} to run on the {opts.executor} executor"
                if rows
                else _nothing_to_run(store, sweep_id, opts)
            )
            first = False
        if rows:
            jobs = [Job(trial_id=i, config=c, attempts=a) for i, c, a in rows]
            attach_prompts(jobs, prompts, spec)
            if executor is None:
                executor = make_executor(
                    opts.executor,
                    warmup=spec.get("warmup", 0),
                    max_attempts=spec.get("max_attempts", 3),
                    address=opts.address,
                    actors=opts.actors,
                    accelerator=opts.accelerator,
                    verbose=opts.verbose,
                )
            for batch in acceptance_first(jobs):  # the profiles stored before Sequoia runs
                attach_acceptance(store, batch)
                sink.add(len(batch))
                executor.run(batch, sink)
            waiting = False
            continue
        held = store.running_elsewhere(sweep_id)
        if not held:
            return
        if not waiting:
            log(f"waiting for {held} trials that other drivers are running")
            waiting = True
        time.sleep(min(CANCEL_POLL_S, store.heartbeat_s))


def _nothing_to_run(store: Store, sweep_id: int, opts: RunOptions) -> str:
    """`nothing to run`, and when trials failed, how to run them again."""
    if opts.retry_failed:
        return "nothing to run"
    failed = store.counts(store.sweep(sweep_id=sweep_id)["name"])[0]["failed"]
    if not failed:
        return "nothing to run"
    return f"nothing to run: {failed} trials failed before; --retry-failed runs them again"


def _leave(store: Store, sweep_id: int, sink: DriverSink, retry: bool) -> SweepStatus | None:
    """Put this driver's trials in flight back to pending and settle the sweep's status;
    None when the database cannot be reached (then the leases run out instead)."""
    try:
        if sink.in_flight:
            store.reset_running(sink.in_flight, retry=retry)
            sink.in_flight.clear()
        return store.finish_run(sweep_id, retry=retry)
    except StoreError:
        if retry:
            raise
        return None


def _heartbeat(store: Store, sweep_id: int, stop: threading.Event) -> None:
    while not stop.wait(store.heartbeat_s):
        try:
            store.heartbeat(sweep_id)
        except StoreError:  # missed: the lease outlasts several heartbeats
            pass


def _pause_point() -> tuple[int, Path] | None:
    spec = os.environ.get(PAUSE_ENV)
    if not spec:
        return None
    n, _, path = spec.partition(":")
    if not n.isdigit() or not path:
        raise ConfigError(f"{PAUSE_ENV} must be N:PATH, got {spec!r}")
    return int(n), Path(path)


def _hold(path: Path) -> None:
    path.touch()
    while path.exists():
        time.sleep(0.05)
