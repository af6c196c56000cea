"""A sweep's `hardware:` key (orchestrator/spec/parse.py documents the file): the hardware
types each config runs on, one trial per config and type (orchestrator/spec/expand.py
`per_hardware`), the types spelled as orchestrator/hardware.py says."""

from __future__ import annotations

from typing import Any

from orchestrator.hardware import canonical, device_fits, hardware_problem, is_gpu
from orchestrator.spec.values import SpecError, nonempty_list


def parse_hardware(value: Any, where: str, device: str, device_where: str) -> tuple[str, ...]:
    """`hardware: H100` or `hardware: [H100, A100, cpu]` as canonical types in the file's order;
    a type given twice (in any case) or one the sweep's `device:` cannot run is an error."""
    items = value if isinstance(value, list) else [value]
    listed = isinstance(value, list)
    out: list[str] = []
    for j, item in enumerate(nonempty_list(items, where)):
        at = f"{where}[{j}]" if listed else where
        problem = hardware_problem(item)
        if problem:
            raise SpecError(f"{at}: {problem}")
        hw = canonical(item)
        if hw in out:
            raise SpecError(f"{at}: {hw} is listed twice (types compare without case)")
        if not device_fits(device, hw):
            runs = "cuda (or leave device out)" if is_gpu(hw) else "cpu (or leave device out)"
            raise SpecError(
                f"{device_where}: {device!r} cannot run hardware {hw}; a sweep with `hardware: "
                f"{hw}` runs on {runs}"
            )
        out.append(hw)
    return tuple(out)
