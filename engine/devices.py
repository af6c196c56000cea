"""Where and in what a model runs: the devices this machine has, the dtypes by name (bf16 on
CUDA, fp32 on a CPU by default) and the attention implementations a target may load with;
each checked before any model loads (engine/models.py loads them)."""

from __future__ import annotations

import re

import torch

from engine.config import ConfigError

DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?|mps")


def check_device(device: str | None) -> str:
    """`device` if this machine has it (auto, cpu, cuda, cuda:N, mps), else ConfigError."""
    d = "auto" if device is None else device
    if not DEVICE.fullmatch(d):
        raise ConfigError(f"device {d!r} is not one of auto, cpu, cuda, cuda:N, mps")
    if d.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ConfigError(f"device {d!r}: CUDA is not available on this machine")
        n, index = torch.cuda.device_count(), int(d.partition(":")[2] or 0)
        if index >= n:
            raise ConfigError(f"device {d!r}: this machine has {n} CUDA devices (cuda:0..{n - 1})")
    if d == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"device {d!r}: MPS is not available on this machine")
    return d


def pick_device(device: str | None = None) -> torch.device:
    device = check_device(device)
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def pick_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """Default: bf16 on CUDA; fp32 on CPU, where bf16 matmuls are emulated (MODELS.md)."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in (None, "auto"):
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    table = {
        "float32": torch.float32,
        "fp32": torch.float32,
        "bfloat16": torch.bfloat16,
        "bf16": torch.bfloat16,
        "float16": torch.float16,
        "fp16": torch.float16,
    }
    if dtype not in table:
        raise ConfigError(f"unknown dtype {dtype!r} (known: {', '.join(table)})")
    return table[dtype]


# sdpa_gqa (tree_kernels/sdpa_gqa.py, the default): transformers' sdpa without its key/value copy
# per query head under a mask; tree_triton: the Triton tree kernel for verification forwards
ATTENTION = ("sdpa_gqa", "sdpa", "eager", "tree_triton")


def check_attn(attn: str) -> str:
    if attn not in ATTENTION:
        raise ConfigError(f"unknown attention {attn!r} (known: {', '.join(ATTENTION)})")
    return attn
