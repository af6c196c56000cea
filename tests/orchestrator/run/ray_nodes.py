"""A real multi-node Ray cluster on this one machine, as test_multinode.py starts one: `ray start
--head` (no CPUs, no GPUs: it only schedules) plus worker nodes, each with one CPU and `gpus`
fake GPUs (Ray's resources on this CPU machine), every node bound to 127.0.0.1 with token
authentication off. Each worker node runs from its own working folder, so a file the driver
reads by a relative or temporary path is the driver's alone."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil

from orchestrator.run.executors.reaper import session_processes

RAY = str(Path(sys.executable).with_name("ray"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ports() -> list[str]:
    """Each node's agents on free ports (the defaults would collide)."""
    return [
        "--dashboard-agent-listen-port",
        str(free_port()),
        "--dashboard-agent-grpc-port",
        str(free_port()),
        "--runtime-env-agent-port",
        str(free_port()),
        "--metrics-export-port",
        str(free_port()),
    ]


@contextlib.contextmanager
def ray_cluster(workers: int = 2, gpus: int = 1):
    """Yields {"address", "temp", "env"}; every Ray process of it is gone afterwards."""
    temp = tempfile.mkdtemp(prefix="orch-ray-", dir="/tmp")  # short: Ray's socket paths
    port = free_port()
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    common = ["--node-ip-address", "127.0.0.1", "--temp-dir", temp, "--disable-usage-stats"]
    try:
        subprocess.run(
            [RAY, "start", "--head", "--port", str(port), "--num-cpus", "0", "--num-gpus", "0",
             "--include-dashboard", "false", *common, *_ports()],
            env=env, check=True, capture_output=True, timeout=180,
        )  # fmt: skip
        for i in range(workers):
            home = Path(temp) / f"node{i}"
            home.mkdir()
            subprocess.run(
                [RAY, "start", "--address", f"127.0.0.1:{port}", "--num-cpus", "1",
                 "--num-gpus", str(gpus), "--resources", json.dumps({f"worker{i}": 1}),
                 *common, *_ports()],
                env=env, cwd=home, check=True, capture_output=True, timeout=180,
            )  # fmt: skip
        yield {"address": f"127.0.0.1:{port}", "temp": temp, "env": env}
    finally:
        procs = session_processes(temp)
        for p in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.send_signal(signal.SIGKILL)
        psutil.wait_procs(procs, timeout=30)


def worker_nodes(cluster: dict) -> set[str]:
    """The ids of the live nodes that have CPUs (the worker nodes)."""
    code = (
        "import ray, json; ray.init(address='%s', log_to_driver=False); "
        "print(json.dumps([n['NodeID'] for n in ray.nodes() "
        "if n['Alive'] and n['Resources'].get('CPU')]))" % cluster["address"]
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=cluster["env"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    return set(json.loads(out.strip().splitlines()[-1]))
