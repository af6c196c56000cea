"""The worker's side of a sweep's `hardware:` (orchestrator/hardware.py): a trial runs only on
a device of its hardware type, checked before any model loads (run/trial.py run_trial), so a
trial the executor placed wrongly fails in one line instead of measuring on other hardware."""

from __future__ import annotations

import os
import socket

from engine.config import ConfigError
from orchestrator.hardware import CPU, canonical, gpu_type
from orchestrator.records import TrialConfig

# Test hook: this worker's GPU is a stand-in of the named type (a fake GPU node on a CPU
# machine, `ray start --num-gpus 1 --resources '{"accelerator_type:H100": 1}'`, as the
# multi-node test starts them): trials for cuda load on the CPU, and check_hardware takes
# the stand-in's type for the device's.
STAND_IN_ENV = "ORCH_TEST_GPU_TYPE"


class HardwareMismatch(ConfigError):
    """The trial's hardware type is not the type of the device this worker runs it on."""


def check_hardware(config: TrialConfig) -> None:
    """HardwareMismatch unless this worker runs the trial on its hardware type (None: any)."""
    if config.hardware is None:
        return
    actual, shown = worker_hardware(config.device)
    if actual != config.hardware:
        raise HardwareMismatch(
            f"hardware {config.hardware}: the worker on {socket.gethostname()} would run the "
            f"trial on {shown}, not on {config.hardware} (not run)"
        )


def worker_hardware(device: str) -> tuple[str, str]:
    """(the hardware type this process runs `device` on, how to show it): cpu, or the GPU's
    type as Ray names it (orchestrator.hardware.gpu_type of the device's name)."""
    if not device.startswith("cuda"):
        return CPU, device
    stand_in = os.environ.get(STAND_IN_ENV)
    if stand_in:
        return canonical(stand_in), f"a stand-in {canonical(stand_in)} ({STAND_IN_ENV})"
    import torch  # lazy: torch

    if not torch.cuda.is_available():
        return CPU, "cpu (this worker has no GPU)"
    index = torch.device(device).index or 0
    name = torch.cuda.get_device_name(index)
    return gpu_type(name), f"{gpu_type(name)} ({name}, cuda:{index})"
