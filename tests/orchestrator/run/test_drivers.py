"""Many driver processes on overlapping sweeps, on SQLite and on the real Postgres server
(driver_proc.py: the runner with a fake executor, so trials take milliseconds). They split
the trials; drivers killed with SIGKILL at random points lose theirs to the others; a stopped
driver loses its trial once its lease runs out. Afterwards every config has exactly one
result, every sweep is finished, and only a trial a kill interrupted ran twice."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

from sqlalchemy import func, select

from db.models import Result, Sweep, Trial
from orchestrator.run.runner import PAUSE_ENV
from orchestrator.store import Store
from tests.orchestrator.driver_proc import executions
from tests.orchestrator.orch_helpers import HELPERS, PG_PASSWORD, REPO, fake_config

SWEEPS = {"a": (0, 16), "b": (8, 24), "c": (16, 32), "all": (0, 32)}  # config index ranges
CONFIGS = 32
HASHES = [fake_config(i).config_hash for i in range(CONFIGS)]


def _start(url, name, log, delay=0.05, lease_s=60.0, pause=None):
    first, last = SWEEPS[name]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(HELPERS)])}
    if pause is not None:
        env[PAUSE_ENV] = pause
    return subprocess.Popen(
        [sys.executable, str(HELPERS / "driver_proc.py"), url, name, str(first), str(last)]
        + [str(delay), str(log), str(lease_s)],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(procs, timeout=300):
    """Each driver's exit 0 and summary (and stderr)."""
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=timeout)
        assert p.returncode == 0, err[-3000:]
        assert PG_PASSWORD not in out + err
        outs.append((json.loads(out), err))
    return outs


def _check(url, sweeps):
    """One result per config, every trial done and unowned, every sweep finished, stored and
    as `orch status` shows it."""
    store = Store(url)
    with store.Session() as s:
        n_trials = s.scalar(select(func.count()).select_from(Trial))
        n_results = s.scalar(select(func.count()).select_from(Result))
        n_hashes = s.scalar(select(func.count(func.distinct(Result.config_hash))))
        not_done = s.scalar(select(func.count()).where(Trial.status != "done"))
        owned = s.scalar(select(func.count()).where(Trial.owner.is_not(None)))
        stored = dict(s.execute(select(Sweep.name, Sweep.status)).all())
    shown = {r["sweep"]: (r["status"], r["done"] == r["trials"]) for r in store.counts()}
    store.close()
    configs = len({i for n in sweeps for i in range(*SWEEPS[n])})
    assert (n_trials, n_results, n_hashes, not_done, owned) == (configs, configs, configs, 0, 0)
    assert stored == {n: "finished" for n in sweeps}
    assert shown == {n: ("finished", True) for n in sweeps}


def test_drivers_on_overlapping_sweeps_split_the_trials(db_url, tmp_path):
    log = tmp_path / "runs.log"
    names = ["a", "b", "c", "all", "b"]  # two drivers on b
    outs = _finish([_start(db_url, n, log, delay=0.1) for n in names])
    assert [o["status"] for o, _ in outs] == ["finished"] * len(names)
    assert sum(o["ran"] for o, _ in outs) == CONFIGS
    assert executions(log) == {h: 1 for h in HASHES}
    _check(db_url, SWEEPS)


def test_drivers_killed_at_random_points(db_url, tmp_path):
    """Five drivers; once results come in, two of them are killed with SIGKILL at random
    moments. The others take over the killed drivers' trials at once (same host, process
    gone); a resume of every sweep then finds everything finished."""
    rng = random.Random(2024)
    log = tmp_path / "runs.log"
    names = ["a", "b", "c", "all", "b"]
    procs = [_start(db_url, n, log, delay=0.1) for n in names]
    victims = rng.sample(range(len(procs)), 2)
    try:
        deadline = time.time() + 120
        while not executions(str(log)):
            assert time.time() < deadline, [p.poll() for p in procs]
            time.sleep(0.02)
        for v in victims:
            time.sleep(rng.uniform(0.0, 0.5))
            procs[v].send_signal(signal.SIGKILL)
    finally:
        for v in victims:
            procs[v].communicate()
    survivors = _finish([p for i, p in enumerate(procs) if i not in victims])
    assert all(o["status"] == "finished" for o, _ in survivors)
    _finish([_start(db_url, n, log) for n in SWEEPS])
    runs = executions(str(log))
    assert set(runs) == set(HASHES)
    assert sum(n - 1 for n in runs.values()) <= len(victims)  # one trial in flight each
    _check(db_url, SWEEPS)


def test_a_stopped_driver_loses_its_trial_when_its_lease_runs_out(db_url, tmp_path):
    """Driver A (3 s lease) is held on its first trial and then stopped (SIGSTOP: alive, no
    heartbeat). Driver B runs the rest and takes A's trial over once A's lease has run out
    (waiting for it if B is done first). Resumed, A finishes its copy too late: B's result
    stands; both exit 0."""
    log = tmp_path / "runs.log"
    pause = tmp_path / "paused"
    a = _start(db_url, "a", log, lease_s=3.0, pause=f"1:{pause}")
    deadline = time.time() + 120
    while not pause.exists():
        assert a.poll() is None and time.time() < deadline, a.communicate()
        time.sleep(0.02)
    os.kill(a.pid, signal.SIGSTOP)
    b = _start(db_url, "a", log)
    try:
        ((b_out, _),) = _finish([b])
    finally:
        pause.unlink()
        os.kill(a.pid, signal.SIGCONT)
    ((a_out, _),) = _finish([a])
    assert (a_out["ran"], b_out["ran"]) == (1, 16)
    assert a_out["status"] == b_out["status"] == "finished"
    first = HASHES[0]
    assert executions(str(log)) == {h: 2 if h == first else 1 for h in HASHES[:16]}
    store = Store(db_url)
    with store.Session() as s:
        (throughput,) = s.execute(
            select(Result.throughput).where(Result.config_hash == first)
        ).one()
    store.close()
    assert throughput == b.pid  # the first result stands
    _check(db_url, ["a"])
