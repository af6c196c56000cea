"""A driver process for test_drivers.py, and the fake executor the in-process driver tests use.

`python driver_proc.py URL SWEEP FIRST LAST DELAY LOG [LEASE_S]` submits sweep SWEEP with the
configs fake_config(FIRST) ... fake_config(LAST - 1) (so that sweeps overlap by range) and
runs it through orchestrator.run.runner.run_sweep, the code `orch submit` runs, with FakeExecutor:
each trial sleeps DELAY seconds, appends "config_hash pid" to LOG (one line, O_APPEND, so the
test can count how often each config ran) and returns a fixed result whose throughput is the
pid. Prints the run summary as one JSON object.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Callable

from orchestrator.run import runner
from orchestrator.run.executors import Job, Sink, Worker
from orchestrator.store import Store
from tests.orchestrator.orch_helpers import fake_config, fake_result


class FakeExecutor:
    """Runs jobs in order in this process like LocalExecutor, without a model. `on_step` is
    called with ("claimed", n) once the nth trial of this executor is claimed and with
    ("recorded", n) once its result is written."""

    def __init__(
        self, delay: float, log: str, on_step: Callable[[str, int], None] | None = None
    ) -> None:
        self.delay, self.log, self.on_step = delay, log, on_step or (lambda step, n: None)
        self.claimed = 0

    def run(self, jobs: list[Job], sink: Sink) -> None:
        worker = Worker(name="fake", host=socket.gethostname(), gpu_id=None)
        for job in jobs:
            if sink.stop_requested():
                return
            if not sink.start(job, worker):
                continue
            self.claimed += 1
            n = self.claimed
            self.on_step("claimed", n)
            time.sleep(self.delay)
            with open(self.log, "a") as f:
                f.write(f"{job.config.config_hash} {os.getpid()}\n")
            sink.done(job, fake_result(job.config, throughput=float(os.getpid())))
            self.on_step("recorded", n)


def use_fake_executor(executor: FakeExecutor, set_attr: Callable = setattr) -> None:
    """Make orchestrator.run.runner run sweeps on `executor` (pass pytest's monkeypatch.setattr
    to undo it after a test)."""
    set_attr(runner, "make_executor", lambda *args, **kw: executor)
    set_attr(runner, "attach_prompts", lambda jobs, cache, spec=None: None)


def executions(log: str) -> dict[str, int]:
    """config hash -> how many times a fake trial of it finished."""
    counts: dict[str, int] = {}
    if os.path.exists(log):
        with open(log) as f:
            for line in f:
                h = line.split()[0]
                counts[h] = counts.get(h, 0) + 1
    return counts


def main(url: str, name: str, first: int, last: int, delay: float, log: str, lease_s: float):
    store = Store(url, lease_s=lease_s, retry_s=60.0)
    configs = [fake_config(i) for i in range(first, last)]
    sweep_id = store.submit(name, {"name": name}, configs, "v").sweep_id
    use_fake_executor(FakeExecutor(delay, log))
    opts = runner.RunOptions(executor="fake", progress=False, lease_s=lease_s)
    s = runner.run_sweep(store, sweep_id, opts, log=lambda line: print(line, file=sys.stderr))
    store.close()
    print(json.dumps({"sweep": s.sweep, "ran": s.ran, "done": s.done, "status": str(s.status)}))


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], a[1], int(a[2]), int(a[3]), float(a[4]), a[5], float(a[6]) if a[6:] else 60.0)
