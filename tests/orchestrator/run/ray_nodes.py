"""A real multi-node Ray cluster on this one machine, for the multi-node tests
(test_multinode.py, test_prompt_files_cluster.py): `ray start --head` (no CPUs, no GPUs: it only
schedules) plus worker nodes, each with one CPU and `gpus` fake GPUs (Ray's resources on this
CPU machine), every node bound to 127.0.0.1 on ports reserved for it and Ray's token
authentication off for this private test cluster. Each worker node runs from its own working
folder, so a file the driver reads by a relative or temporary path is the driver's alone; with
`types`, worker node i is labelled a node of GPU type types[i] (`accelerator_type:X`, as Ray
labels real GPU nodes) and its GPU is a stand-in of that type
(orchestrator.run.worker_hardware.STAND_IN_ENV: its cuda trials run on the CPU)."""

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
from orchestrator.run.worker_hardware import STAND_IN_ENV

RAY = str(Path(sys.executable).with_name("ray"))
WORKER_PORTS = 24  # per node: its worker processes (actors, idle workers, job drivers)
NODE_PORTS = ["--node-manager-port", "--object-manager-port", "--dashboard-agent-listen-port",
              "--dashboard-agent-grpc-port", "--runtime-env-agent-port", "--metrics-export-port"]  # fmt: skip


def free_ports(n: int) -> list[int]:
    """`n` distinct free ports: every socket is bound before any is read and all are closed
    together (one socket at a time, the system may hand a just-closed port out again: the
    dashboard and the runtime-env agent both got 36929 once and `ray start --head` failed)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def node_ports(ports: list[int], head: bool) -> list[str]:
    """`ray start` options naming every port the node would otherwise pick itself (each its
    own, from `ports`, which the caller reserved at once for the whole cluster), so the nodes
    collide neither with each other nor with any other Ray on this machine."""
    names = NODE_PORTS + (["--ray-client-server-port"] if head else [])
    out = [x for name in names for x in (name, str(ports.pop()))]
    workers = [str(ports.pop()) for _ in range(WORKER_PORTS)]
    return out + ["--worker-port-list", ",".join(workers)]


def kill(procs: list) -> None:
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.send_signal(signal.SIGKILL)
    psutil.wait_procs(procs, timeout=30)


@contextlib.contextmanager
def ray_cluster(workers: int = 2, gpus: int = 1, types: tuple[str, ...] = (), dashboard=False):
    """Yields {"address", "temp", "env"} (and "jobs", the Jobs API's URL, with `dashboard`);
    with `types`, one worker node per type. Every Ray process of it is gone afterwards."""
    workers = len(types) or workers
    temp = tempfile.mkdtemp(prefix="orch-ray-", dir="/tmp")  # short: Ray's socket paths
    per_node = len(NODE_PORTS) + WORKER_PORTS
    ports = free_ports(2 + 1 + per_node * (1 + workers))
    port, dash = ports.pop(), ports.pop()
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # `orch`
    common = ["--node-ip-address", "127.0.0.1", "--temp-dir", temp, "--disable-usage-stats"]
    board = (["--dashboard-host", "127.0.0.1", "--dashboard-port", str(dash)] if dashboard
             else ["--include-dashboard", "false"])  # fmt: skip
    try:
        subprocess.run(
            [RAY, "start", "--head", "--port", str(port), "--num-cpus", "0", "--num-gpus", "0",
             *board, *common, *node_ports(ports, head=True)],
            env=env, check=True, capture_output=True, timeout=180,
        )  # fmt: skip
        for i in range(workers):
            home = Path(temp) / f"node{i}"
            home.mkdir()
            resources = {f"worker{i}": 1}
            node_env = env
            if types:
                resources[f"accelerator_type:{types[i]}"] = 1
                node_env = {**env, STAND_IN_ENV: types[i]}
            subprocess.run(
                [RAY, "start", "--address", f"127.0.0.1:{port}", "--num-cpus", "1",
                 "--num-gpus", str(gpus), "--resources", json.dumps(resources),
                 *common, *node_ports(ports, head=False)],
                env=node_env, cwd=home, check=True, capture_output=True, timeout=180,
            )  # fmt: skip
        out = {"address": f"127.0.0.1:{port}", "temp": temp, "env": env}
        yield {**out, "jobs": f"http://127.0.0.1:{dash}"} if dashboard else out
    finally:
        kill(session_processes(temp))
        assert not session_processes(temp), "Ray processes of the test cluster outlived it"


def worker_resources(cluster: dict) -> dict[str, dict[str, float]]:
    """{node id: its resources} of the live nodes that have CPUs (the worker nodes)."""
    code = (
        "import ray, json; ray.init(address='%s', log_to_driver=False); "
        "print(json.dumps({n['NodeID']: n['Resources'] for n in ray.nodes() "
        "if n['Alive'] and n['Resources'].get('CPU')}))" % cluster["address"]
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=cluster["env"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def worker_nodes(cluster: dict) -> set[str]:
    """The ids of the live worker nodes."""
    return set(worker_resources(cluster))
