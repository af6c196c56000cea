"""Targets larger than one GPU: a trial's target spread over the GPUs its actor reserved, or
partly offloaded to host memory (a sweep's `placement:`, docs/models.md).

`plan` computes the device map (Hugging Face accelerate's `infer_auto_device_map` over an
empty, meta-device copy of the model: nothing is allocated): each decoder layer whole on one
GPU, in order, each GPU given its memory budget (the draft's weights taken off GPU 0's, since
the draft runs there), and with `offload: cpu` what does not fit marked "cpu": its weights stay
in host memory and move to the GPU for each forward (accelerate's offload hooks), as in
DySpec's 70B setting. Without offload a target that does not fit is refused in one line.

`load_placed` loads the target on that plan: on CUDA, transformers and accelerate place each
layer straight on its GPU and hook the offloaded ones; the first GPU is the main device (the
inputs, the logits, the draft). On a worker without CUDA (tests, with GPUs faked by Ray's
resources) the same plan is computed and recorded, the GPUs' layers run on the CPU, and the
offloaded layers go through the same offload hooks (weights off the module, loaded per forward)
with the CPU as their execution device: the hooks and the greedy result are exercised, the
speed of a split or an offload across PCIe is not (a GPU matter).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from engine.config import ConfigError

OFFLOADS = ("cpu",)
UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
UNITS |= {"KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
MEMORY = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?I?B?)\s*", re.I)
GPU_HEADROOM = 0.9  # of a GPU's free memory the weights may take (activations, KV cache)


def parse_memory(text: str | int) -> int:
    """Bytes of "80GiB", "40GB", "512MiB" or a plain number of bytes."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    m = MEMORY.fullmatch(str(text))
    unit = m.group(2).upper() if m else None
    if m is None or unit not in UNITS or float(m.group(1)) <= 0:
        raise ConfigError(f"{text!r} is not an amount of memory (e.g. 80GiB, 40GB, 512MiB)")
    return int(float(m.group(1)) * UNITS[unit])


def describe(placement: dict[str, Any] | None) -> str:
    """The placement as a device name's suffix (profiles and results are per placement):
    "" for one device, else " x4", " x1 +offload cpu", ..."""
    if not placement:
        return ""
    gpus = placement.get("gpus_per_trial", 1)
    off = placement.get("offload")
    return f" x{gpus}" + (f" +offload {off}" if off else "")


def size(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _empty_model(folder: str, dtype: Any) -> Any:
    from accelerate import init_empty_weights  # lazy: accelerate
    from transformers import AutoConfig, AutoModelForCausalLM  # lazy: transformers

    cfg = AutoConfig.from_pretrained(folder)
    with init_empty_weights():
        return AutoModelForCausalLM.from_config(cfg, dtype=dtype)


def plan(
    folder: str,
    dtype: Any,
    gpus: int,
    budget: int,
    offload: str | None = None,
    draft_bytes: int = 0,
    name: str = "target",
) -> dict[str, int | str]:
    """The target's device map over GPUs 0..gpus-1 of `budget` bytes each (module doc)."""
    from accelerate import infer_auto_device_map  # lazy: accelerate
    from accelerate.utils import compute_module_sizes  # lazy: accelerate

    model = _empty_model(folder, dtype)
    need = compute_module_sizes(model, dtype=dtype)[""]
    memory: dict[int | str, int] = {i: budget for i in range(gpus)}
    memory[0] = max(0, budget - draft_bytes)
    if offload:
        memory["cpu"] = max(need, 1) * 2
    quiet = logging.getLogger("accelerate.utils.modeling")
    level = quiet.level  # planning for GPUs this process may not see is the point: no warning
    quiet.setLevel(logging.ERROR)
    try:
        dmap = infer_auto_device_map(
            model,
            max_memory=memory,
            no_split_module_classes=list(getattr(model, "_no_split_modules", None) or []),
            dtype=dtype,
        )
    finally:
        quiet.setLevel(level)
    off = sorted({v for v in dmap.values() if not isinstance(v, int)})
    if off and not offload:
        raise ConfigError(
            f"{name} needs {size(need)} of weights; {gpus} GPUs of {size(budget)} hold less "
            f"(the draft takes {size(draft_bytes)} of GPU 0): raise placement.gpus_per_trial "
            f"or set placement.offload: cpu"
        )
    return {k: (v if isinstance(v, int) else "cpu") for k, v in dmap.items()}


def gpu_budget(placement: dict[str, Any], gpus: int) -> int:
    """Each GPU's budget for weights: placement.gpu_memory, else the smallest free memory of
    the visible CUDA devices (times GPU_HEADROOM); ConfigError where neither says."""
    import torch  # lazy: torch

    if placement.get("gpu_memory") is not None:
        return parse_memory(placement["gpu_memory"])
    if torch.cuda.is_available() and torch.cuda.device_count() >= gpus:
        return int(min(torch.cuda.mem_get_info(i)[0] for i in range(gpus)) * GPU_HEADROOM)
    raise ConfigError(
        f"placement: this worker sees {torch.cuda.device_count()} CUDA devices for "
        f"gpus_per_trial {gpus}; give placement.gpu_memory to plan without them"
    )


def load_placed(
    folder: str, dtype: Any, placement: dict[str, Any], draft_bytes: int, name: str
) -> tuple[Any, Any, dict[str, Any]]:
    """The target loaded on its plan: (model, main device, what the trial records)."""
    import torch  # lazy: torch
    from transformers import AutoModelForCausalLM  # lazy: transformers

    gpus = int(placement.get("gpus_per_trial", 1))
    offload = placement.get("offload")
    budget = gpu_budget(placement, gpus)
    dmap = plan(folder, dtype, gpus, budget, offload, draft_bytes, name)
    on_cuda = torch.cuda.is_available() and torch.cuda.device_count() >= gpus
    record = {
        "gpus_per_trial": gpus,
        "offload": offload,
        "gpu_budget_bytes": budget,
        "device_map": dmap,
        "offloaded": sum(1 for v in dmap.values() if v == "cpu"),
        "executed_on": "cuda" if on_cuda else "cpu",
    }
    if on_cuda:
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, device_map=dmap)
        return model, torch.device("cuda:0"), record
    from accelerate import cpu_offload  # lazy: accelerate

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
    for module_name, where in dmap.items():
        if where == "cpu":  # the offload hooks, executing on the CPU here
            sub = model.get_submodule(module_name) if module_name else model
            cpu_offload(sub, execution_device=torch.device("cpu"))
    return model, torch.device("cpu"), record


def model_bytes(model: Any) -> int:
    """The bytes of a loaded model's parameters and buffers (the draft beside the target)."""
    tensors = list(model.parameters()) + list(model.buffers())
    return int(sum(t.numel() * t.element_size() for t in tensors))
