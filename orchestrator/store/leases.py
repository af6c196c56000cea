"""Driver identity and liveness for per-trial leases (trials.py).

A driver's id is `host:pid:start:nonce`: `start` is when its process started (clock ticks
after boot, from /proc; 0 where there is none), so a pid reused by a later process is told
apart, and `nonce` tells apart drivers in one process. A driver on this host is dead when its
pid is gone, a zombie, or taken by a process that started at another time; a driver on another
host is judged by its lease alone.
"""

from __future__ import annotations

import os
import secrets
import socket

LEASE_S = 60.0  # a driver's claim on a trial, renewed by its heartbeat
HEARTBEAT_S = 10.0  # the longest time between two heartbeats (lease_s / 6 when shorter)
HOST = socket.gethostname()


def new_driver_id() -> str:
    """A new id for a driver in this process (see the module docstring)."""
    start = proc_stat(os.getpid())
    return f"{HOST}:{os.getpid()}:{start[1] if start else 0}:{secrets.token_hex(4)}"


def owner_alive(owner: str) -> bool:
    """False when `owner` is a driver on this host whose process is gone: no such pid, a
    zombie, or a pid now used by a process started at another time. True otherwise (a driver
    on another host is judged by its lease alone)."""
    try:
        host, pid, start, _ = owner.rsplit(":", 3)
    except ValueError:
        return True
    if host != HOST or not pid.isdigit():
        return True
    if os.path.isdir("/proc/self"):
        stat = proc_stat(int(pid))
        return stat is not None and stat[0] != "Z" and stat[1] == start
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass
    return True


def proc_stat(pid: int) -> tuple[str, str] | None:
    """(state, start time) of a process from /proc, None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], fields[19]  # fields 3 and 22 of proc(5)
