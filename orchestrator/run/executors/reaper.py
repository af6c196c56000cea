"""Ends a local Ray cluster's processes once the driver that started it is gone.

`ray.init()` in the driver starts Ray's own processes (GCS, raylet, dashboard and runtime-env
agents, workers). A driver that exits normally shuts them down; one killed with SIGKILL cannot,
and Ray's agents then live on, reparented to init. The driver therefore starts this module in
a session of its own:

    python -m orchestrator.run.executors.reaper DRIVER_PID DRIVER_START_TIME SESSION_DIR

It waits for that process to end, gives Ray a moment to stop by itself, then kills every
process that still names the session directory on its command line or holds a file in it open
(Ray's renamed `ray::...` processes log there). Nothing outside that session is touched.
"""

from __future__ import annotations

import sys
import time

import psutil

GRACE_S = 3.0  # Ray's own shutdown after the driver is gone


def alive(pid: int, start_time: float) -> bool:
    try:
        p = psutil.Process(pid)
        return p.create_time() == start_time and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def session_processes(session_dir: str) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any(session_dir in part for part in p.info["cmdline"] or []) or any(
                f.path.startswith(session_dir) for f in p.open_files()
            ):
                out.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return out


def main(argv: list[str]) -> None:
    pid, start_time, session_dir = int(argv[0]), float(argv[1]), argv[2]
    while alive(pid, start_time):
        time.sleep(0.5)
    time.sleep(GRACE_S)
    left = session_processes(session_dir)
    for p in left:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(left, timeout=10)


if __name__ == "__main__":
    main(sys.argv[1:])
