"""How a sweep will run, checked before anything is written to the database: the executor is
installed, a Ray address answers, GPUs asked for exist, the trials' device exists (local
executor), the hardware types the trials name are here (local executor: this machine's own;
Ray: a node of each type in the cluster). A failure here is one line and leaves the database
as it was."""

from __future__ import annotations

import importlib
import logging
import os
import re
import socket
import sys
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from engine.config import ConfigError
from orchestrator.extras import require
from orchestrator.hardware import CPU, gpu_type, is_gpu, missing, node_types

ADDRESS_TIMEOUT_S = 5.0
_ADDRESS = re.compile(r"(?:ray://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})")


class PreflightError(ConfigError):
    """The sweep cannot run as asked (no Ray, no GPU, no such device, cluster unreachable)."""


def check_run(opts: Any, devices: Iterable[str], hardware: Iterable[str | None] = ()) -> None:
    """`opts`: orchestrator.run.runner.RunOptions; `devices`: the trials' `device` values;
    `hardware`: the hardware types of the trials that will run (None: none named)."""
    hardware = sorted({h for h in hardware if h is not None})
    if opts.executor == "local":
        from engine.devices import check_device  # lazy: torch

        ray_only = {"--address": opts.address, "--actors": opts.actors}
        ray_only["--accelerator"] = None if opts.accelerator == "auto" else opts.accelerator
        given = [name for name, value in ray_only.items() if value is not None]
        if given:
            one = len(given) == 1
            raise PreflightError(
                f"{', '.join(given)} set{'s' if one else ''} up the Ray executor; --executor "
                "local runs the trials one at a time in this process (leave "
                f"{'it' if one else 'them'} out, or use --executor ray)"
            )

        away = missing(hardware, local_hardware())
        if away:
            raise PreflightError(
                f"hardware {', '.join(away)}: the local executor runs trials on this machine, "
                f"which has {', '.join(sorted(local_hardware()))} (run them with --executor ray "
                "on a cluster with such nodes, or pick this machine's with --only hardware=...)"
            )
        for d in sorted(set(devices)):
            try:
                check_device(d)
            except ConfigError as e:
                raise PreflightError(f"{e} (the local executor runs trials here)") from None
        return
    if opts.executor != "ray":
        raise PreflightError(f"unknown executor {opts.executor!r} (known: local, ray)")
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
    if hardware:
        check_cluster_hardware(opts, hardware)


def check_cluster_hardware(opts: Any, hardware: list[str]) -> None:
    """The Ray cluster (opts.address; else the Ray this process runs, else this machine) has
    a node of each hardware type, and --accelerator does not contradict them: each type gets
    actors of its own (orchestrator/run/executors/hardware_actors.py). A type must have a
    node when the sweep starts; the autoscaler may add more of it for --actors."""
    clash = []
    if opts.accelerator == "cpu":
        clash = [h for h in hardware if is_gpu(h)]
    elif opts.accelerator == "gpu":
        clash = [h for h in hardware if h == CPU]
    if clash:
        raise PreflightError(
            f"--accelerator {opts.accelerator} contradicts the sweep's hardware "
            f"{', '.join(clash)} (leave --accelerator out: each hardware type gets its own actors)"
        )
    have = cluster_hardware(opts.address)
    away = missing(hardware, have)
    if away:
        at = f" at {opts.address}" if opts.address not in (None, "auto") else ""
        what = "that type" if len(away) == 1 else "those types"
        raise PreflightError(
            f"hardware {', '.join(away)}: the Ray cluster{at} has no node of {what} (it has: "
            f"{', '.join(sorted(have)) or 'no nodes'})"
        )


def local_hardware() -> set[str]:
    """This machine's hardware types: cpu and the type of each of its GPUs."""
    import torch  # lazy: torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return {CPU} | {gpu_type(torch.cuda.get_device_name(i)) for i in range(gpus)}


def cluster_hardware(address: str | None) -> dict[str, tuple[str, float]]:
    """orchestrator.hardware.node_types of the Ray cluster at `address` (the Ray this process
    runs, when it runs one; without an address and Ray, this machine's, as the local Ray the
    executor starts would see it); the connection is closed again unless it was open."""
    ray = importlib.import_module("ray")
    if ray.is_initialized():
        return node_types(ray.nodes())
    if not address:
        return {h: (h, 1.0) for h in local_hardware()}
    # quiet: a refusal is one line, without Ray's "Connecting to ..." lines before it
    return _ask_cluster(ray, address, lambda: node_types(ray.nodes()), quiet=True)


def _ask_cluster(ray: Any, address: str, ask: Any, quiet: bool = False) -> Any:
    """`ask()` answered while connected to the Ray cluster at `address` (the database URL
    kept out of the connection's environment), the connection closed again; PreflightError
    in one line when the cluster cannot be joined."""
    hidden = {k: os.environ.pop(k) for k in ("ORCH_DB_URL",) if k in os.environ}
    try:
        ray.init(
            address=address,
            log_to_driver=False,
            **({"logging_level": logging.WARNING} if quiet else {}),
        )
        return ask()
    except Exception as e:  # noqa: BLE001 - ray raises many kinds for a cluster it cannot join
        first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
        raise PreflightError(f"cannot join the Ray cluster at {address}: {first}") from None
    finally:
        os.environ.update(hidden)
        if ray.is_initialized():
            ray.shutdown()


def place_trials(trials: list, opts: Any) -> list:
    """The trials (TrialConfig) with device and dtype `auto` resolved for how they will run
    (orchestrator.spec.expand.place); the placement is asked for only when a trial needs it."""
    from orchestrator.spec import place  # lazy: SQLAlchemy (db.models, the caps)

    auto = any(t.device == "auto" for t in trials)
    return place(trials, placement(opts) if auto else "cpu")


def placement(opts: Any) -> str:
    """The device trials with `device: auto` run on under `opts` (RunOptions), decided where
    the sweep is expanded, which need not be where it runs (a Ray head without GPUs
    dispatching to GPU workers): the local executor runs them on this machine (cuda when it
    has a GPU, as engine.devices.pick_device does); Ray runs them on GPU actors, so cuda, with
    `--accelerator gpu` or (auto) when the cluster has GPUs, as the Ray executor plans its
    actors; else cpu."""
    if opts.executor == "local":
        import torch  # lazy: torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    if opts.accelerator != "auto":
        return "cuda" if opts.accelerator == "gpu" else "cpu"
    gpus = _cluster_gpus(opts.address) if opts.address else _local_gpus()
    return "cuda" if gpus > 0 else "cpu"


def _cluster_gpus(address: str) -> int:
    """GPUs of the Ray cluster at `address` now (what the executor's plan sees when it
    connects); the connection is closed again unless this process had one already."""
    ray = importlib.import_module("ray")
    if ray.is_initialized():
        return int(ray.cluster_resources().get("GPU", 0))
    return _ask_cluster(ray, address, lambda: int(ray.cluster_resources().get("GPU", 0)))


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
    import torch  # lazy: torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def checkpoint_names(params: dict[str, Any]) -> list[str]:
    """The checkpoints a method's parameters name: the values of `checkpoint` and of every
    parameter ending in `_checkpoint` (engine/checkpoint.py), in parameter order."""
    return [
        str(v)
        for k, v in sorted(params.items())
        if (k == "checkpoint" or k.endswith("_checkpoint")) and v not in (None, "", "none")
    ]


def check_checkpoints(trials: Iterable[Any]) -> None:
    """Every checkpoint the trials' method parameters name (TrialConfig.params, or a resolved
    engine Method's cfg) exists here and is finished; a missing one is one line before any
    model loads (they live under this ORCH_HOME)."""
    from engine.checkpoint import find  # lazy: torch

    params = [t.params if hasattr(t, "params") else asdict(t.cfg) for t in trials]
    for name in sorted({n for p in params for n in checkpoint_names(p)}):
        find(name)  # ConfigError: missing, unfinished


def check_gpus_per_trial(opts: Any, trials: Iterable[Any]) -> None:
    """A sweep's placement.gpus_per_trial (engine/placement.py) where the trials run: a local
    Ray or the local executor needs that many GPUs here, or placement.gpu_memory to plan for
    GPUs it does not see (the CPU stand-in of docs/models.md); a cluster (--address) is
    checked by the Ray executor when it places its actors."""
    wanted = max((t.gpus for t in trials), default=1)
    if wanted <= 1 or opts.address:
        return
    planned = all((t.placement or {}).get("gpu_memory") for t in trials if t.gpus > 1)
    gpus = _local_gpus()
    if opts.executor == "local" and not planned and gpus < wanted:
        raise PreflightError(
            f"placement.gpus_per_trial {wanted}: this machine has {gpus} GPUs for the local "
            f"executor (give placement.gpu_memory to plan without them, or use Ray)"
        )
    if opts.executor == "ray" and gpus < wanted:
        raise PreflightError(
            f"placement.gpus_per_trial {wanted}: the local Ray has {gpus} GPUs, so no actor "
            f"can reserve {wanted} (use --address of a cluster with {wanted}-GPU nodes)"
        )
