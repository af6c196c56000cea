"""How a sweep will run, checked before anything is written to the database: the executor is
installed, a Ray address answers, GPUs asked for exist, the trials' device exists (local
executor). A failure here is one line and leaves the database as it was."""

from __future__ import annotations

import os
import re
import socket
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from engine.config import ConfigError

ADDRESS_TIMEOUT_S = 5.0
_ADDRESS = re.compile(r"(?:ray://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})")


class PreflightError(ConfigError):
    """The sweep cannot run as asked (no Ray, no GPU, no such device, cluster unreachable)."""


def check_run(opts: Any, devices: Iterable[str]) -> None:
    """`opts`: orchestrator.runner.RunOptions; `devices`: the trials' `device` values."""
    if opts.executor == "local":
        from engine.models import check_device

        for d in sorted(set(devices)):
            try:
                check_device(d)
            except ConfigError as e:
                raise PreflightError(f"{e} (the local executor runs trials here)") from None
        return
    if opts.executor != "ray":
        raise PreflightError(f"unknown executor {opts.executor!r} (known: local, ray)")
    from orchestrator.extras import require

    require("ray", "the ray executor", "or --executor local")  # imports it: a broken install too
    if opts.address:
        check_address(opts.address)
    elif opts.accelerator == "gpu":
        gpus = _local_gpus()
        if not gpus:
            raise PreflightError(
                "--accelerator gpu: this machine has no GPU and no --address names a cluster; "
                "use --accelerator cpu, or --address of a cluster with GPU nodes"
            )
        if opts.actors and opts.actors > gpus:
            raise PreflightError(
                f"--actors {opts.actors} with --accelerator gpu: this machine has {gpus} GPUs "
                f"and a local Ray cannot add more"
            )


def check_address(address: str) -> None:
    """A Ray address `ray.init` would accept, whose host answers on its port within
    ADDRESS_TIMEOUT_S (so a wrong address fails here, not after a long wait in Ray)."""
    shown = address
    if address == "auto":
        address = os.environ.get("RAY_ADDRESS") or _current_cluster()
        if not address:
            raise PreflightError(
                "--address auto: no Ray cluster runs on this machine (start one with "
                "`ray start --head`, or give --address HOST:PORT)"
            )
    if address == "local":
        return
    m = _ADDRESS.fullmatch(address)
    if m is None or not 0 < int(m.group(2)) < 65536:
        raise PreflightError(
            f"--address {shown!r} is not auto, local, HOST:PORT or ray://HOST:PORT"
        )
    host, port = m.group(1).strip("[]"), int(m.group(2))
    try:
        with socket.create_connection((host, port), timeout=ADDRESS_TIMEOUT_S):
            pass
    except OSError as e:
        why = e.strerror or type(e).__name__
        if isinstance(e, socket.timeout):
            why = f"no answer within {ADDRESS_TIMEOUT_S:.0f}s"
        raise PreflightError(
            f"cannot reach the Ray cluster at {address}: {why} (is `ray start --head` "
            f"running there, and is the port open?)"
        ) from None


def _current_cluster() -> str | None:
    """The address `ray start --head` on this machine left in Ray's temp folder."""
    base = os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp"
    path = Path(base) / "ray" / "ray_current_cluster"
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def _local_gpus() -> int:
    """GPUs of the Ray this process already runs (tests start one with num_gpus), else of
    this machine."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        return int(ray.cluster_resources().get("GPU", 0))
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0
