"""Hardware types: what a sweep's `hardware:` names (orchestrator/spec/parse.py) and what a Ray
node, a device or this machine is, in one spelling, so that the same type compares equal
wherever it comes from.

A hardware type is `cpu` or a GPU type as Ray names it: Ray gives every GPU node the resource
`accelerator_type:<TYPE>` (ray.util.accelerators: `H100`, `A100`, `A10G`, `L4`, ...), derived
from the device's name (NVIDIA H100 80GB HBM3 -> H100). The canonical spelling is upper case
(`h100` and `H100` are one type and one trial identity); every NVIDIA type Ray lists is upper
case already, so the canonical spelling is Ray's. A Ray node's own spelling is kept where a
resource request must name it exactly (`ray_spelling`). A type Ray does not list (a newer or a
consumer GPU: `GeForce-RTX-4090`) is accepted in the same shape; whether a cluster has it is
for preflight to say (orchestrator/run/preflight.py).

Plain data and string rules only: no torch, no Ray (the sweep file parses without either).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

CPU = "cpu"
PREFIX = "accelerator_type:"  # Ray's node resource for a GPU node's type
_SHAPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}")
# not GPU types: what a device or the executor is called elsewhere
_NOT_TYPES = ("auto", "gpu", "cuda", "mps")
# Ray's rule for an NVIDIA device name (ray/_private/accelerators/nvidia_gpu.py): the first
# all-caps model token after the vendor word, else the product name hyphen-joined
_NVIDIA = re.compile(r"\w+\s+((?:[A-Z]+\s+)*[A-Z0-9]*\d[A-Z0-9]*)")


def hardware_problem(name: Any) -> str | None:
    """Why `name` is not a hardware type a sweep may name, or None."""
    if not isinstance(name, str):
        return f"expected a hardware type (cpu, or a GPU type such as H100, A100, L4), got {name!r}"
    if name.lower() in _NOT_TYPES:
        return (
            f"{name!r} is not a hardware type: name cpu, or a GPU type as Ray's nodes name it "
            "(H100, A100, A10G, L4, ...)"
        )
    if not _SHAPE.fullmatch(name):
        return (
            f"{name!r} is not a hardware type (cpu, or a GPU type such as H100, A100, L4: "
            "letters, digits and -, at most 64 characters)"
        )
    return None


def canonical(name: str) -> str:
    """The one spelling of a hardware type: `cpu`, or the GPU type in upper case."""
    return CPU if name.lower() == CPU else name.upper()


def is_gpu(hardware: str | None) -> bool:
    return hardware is not None and hardware != CPU


def device_for(hardware: str) -> str:
    """The torch device a trial of `hardware` runs on: cpu, or cuda (the actor's own GPU)."""
    return CPU if hardware == CPU else "cuda"


def device_fits(device: str, hardware: str) -> bool:
    """Can a sweep's `device:` run trials of `hardware`? auto always; cpu for cpu; cuda or
    cuda:N for a GPU type."""
    if device == "auto":
        return True
    return device == CPU if hardware == CPU else device.startswith("cuda")


def gpu_type(device_name: str) -> str:
    """The canonical GPU type of a device name (torch.cuda.get_device_name), as Ray derives
    its node's accelerator type from it: `NVIDIA H100 80GB HBM3` -> H100,
    `NVIDIA A100-SXM4-80GB` -> A100, `NVIDIA GeForce RTX 4090` -> GEFORCE-RTX-4090."""
    m = _NVIDIA.match(device_name)
    found = m.group(1).replace(" ", "-") if m else None
    if not found or len(found) <= 1:
        found = re.sub(r"^NVIDIA\s+", "", device_name).strip().replace(" ", "-")
    return canonical(found)


def node_types(nodes: Iterable[dict[str, Any]]) -> dict[str, tuple[str, float]]:
    """{canonical hardware: (the cluster's spelling, its GPUs or CPUs)} of the alive nodes of
    `ray.nodes()`: each `accelerator_type:<TYPE>` with the GPUs of the nodes that have it, and
    `cpu` with the CPUs of every node (a GPU node's CPUs run cpu trials too)."""
    out: dict[str, tuple[str, float]] = {}
    for node in nodes:
        if not node.get("Alive", True):
            continue
        res = node.get("Resources", {})
        for key in res:
            if key.startswith(PREFIX):
                spelled = key[len(PREFIX) :]
                _, had = out.get(canonical(spelled), (spelled, 0.0))
                out[canonical(spelled)] = (spelled, had + float(res.get("GPU", 0)))
        if res.get("CPU"):
            out[CPU] = (CPU, out.get(CPU, (CPU, 0.0))[1] + float(res["CPU"]))
    return out


def missing(wanted: Iterable[str | None], have: Iterable[str]) -> list[str]:
    """The hardware types of `wanted` (None: none named) not in `have`, sorted."""
    have = set(have)
    return sorted({h for h in wanted if h is not None} - have)


def ray_spelling(hardware: str, types: dict[str, tuple[str, float]]) -> str:
    """The name of `hardware` in a resource request: the cluster's own spelling where a node
    has it (node_types), else the canonical one (a node the autoscaler has yet to add)."""
    return types.get(hardware, (hardware, 0.0))[0]
