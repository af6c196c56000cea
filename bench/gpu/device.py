"""The device at hand, as the GPU programs use it: waiting for its queued work, its name in a
report, and torch.compile's graph limits raised for the compiled engine."""

from __future__ import annotations

import torch


def sync(device: torch.device) -> None:
    """Wait for the work queued on a CUDA device (nothing to wait for elsewhere)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def cuda_name(device: torch.device) -> dict:
    """{"device_name": the CUDA device's name} for a report; {} on a CPU."""
    return {"device_name": torch.cuda.get_device_name(device)} if device.type == "cuda" else {}


def allow_many_graphs() -> None:
    """torch.compile's cache and recompile limits raised to 1024: the compiled engine captures
    one graph per model, cache and size bucket, many more than the defaults allow."""
    for key in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit"):
        if hasattr(torch._dynamo.config, key):
            setattr(torch._dynamo.config, key, 1024)
