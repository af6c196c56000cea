"""No Ray process outlives a driver killed with SIGKILL: the local Ray it started (GCS, raylet,
dashboard and runtime-env agents, workers) is ended by orchestrator/run/executors/reaper.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from orchestrator.run.runner import PAUSE_ENV
from tests.orchestrator.orch_helpers import REPO, sweep_24

psutil = pytest.importorskip("psutil")
pytest.importorskip("ray")


def test_sigkilled_driver_leaves_no_ray_process(tmp_path):
    spec = sweep_24(tmp_path / "o.yaml", name="orphans")
    pause = tmp_path / "paused"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "orchestrator.cli",
            "submit",
            str(spec),
            "--db",
            f"sqlite:///{tmp_path / 'o.db'}",
            "--executor",
            "ray",
            "--actors",
            "1",
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), PAUSE_ENV: f"2:{pause}"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 180
        while not pause.exists():
            assert proc.poll() is None and time.time() < deadline
            time.sleep(0.1)
        ray_procs = psutil.Process(proc.pid).children(recursive=True)
        assert any("raylet" in p.name() for p in ray_procs)  # a local Ray is running
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    gone, alive = psutil.wait_procs(ray_procs, timeout=60)
    names = [p.name() for p in alive if p.is_running()]
    for p in alive:
        p.kill()
    assert not names, f"outlived the driver: {names}"
