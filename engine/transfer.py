"""Host-to-device copies without a host synchronisation, and device-to-host reads in one go.

`torch.tensor(data, device="cuda")` and `cpu_tensor.to("cuda")` copy with non_blocking=False,
after which torch synchronises the stream (ATen's CUDA copy kernel): the host waits until every
queued kernel has run, which costs what a read of a device value costs (bench/host_time.py
counts reads; these it cannot see on a CPU). Built on the CPU and copied with
non_blocking=True, the copy is queued behind those kernels instead: from pageable memory CUDA
stages the bytes before the call returns, so the CPU tensor may be freed at once. On the CPU
both forms give the same tensor.
"""

from __future__ import annotations

import torch


def to_device(data, device, dtype: torch.dtype | None = None) -> torch.Tensor:
    """`data` (a list, a number, or a CPU tensor) as a tensor on `device` (dtype: as
    torch.tensor infers it, unless given), copied without a host synchronisation."""
    t = data if isinstance(data, torch.Tensor) else torch.tensor(data, dtype=dtype)
    if dtype is not None and t.dtype != dtype:
        t = t.to(dtype)
    on_host = (device.type if isinstance(device, torch.device) else device) == "cpu"
    if t.device.type == "cpu" and on_host:  # nothing to copy (decoding on the CPU)
        return t
    if on_host:
        return t.to(device)  # towards the host: a read, which must wait for the values
    return t.to(device, non_blocking=True)


def read_pair(values: torch.Tensor, tokens: torch.Tensor) -> tuple[list, list]:
    """`values` (float) and `tokens` (integer ids) of one shape, read to the host in one go
    (one synchronisation): the values as float64 lists, the tokens as int lists (ids below
    2^53 are exact in float64). What a tree builder reads per draft forward."""
    if values.device.type == "cpu":  # no synchronisation to save
        return read_host(values, tokens)
    values_h, tokens_h = torch.stack([values.double(), tokens.double()]).tolist()
    if tokens.dim() == 1:
        return values_h, [int(t) for t in tokens_h]
    return values_h, [[int(t) for t in row] for row in tokens_h]


def read_host(values: torch.Tensor, tokens: torch.Tensor) -> tuple[list, list]:
    """read_pair of CPU tensors: two plain reads, a quarter of the cost of stacking them into
    one (a float32 read is exact in float64). bench/host_time.py HostReads counts it as the one
    read it is on a GPU."""
    return values.tolist(), tokens.tolist()
