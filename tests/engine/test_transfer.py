"""engine/transfer.py: host-to-device copies without a host synchronisation, and the engine's
per-iteration code using them (torch.tensor(..., device=...) and a plain .to(device) of a CPU
tensor synchronise the CUDA stream after the copy)."""

import re
from pathlib import Path

import pytest
import torch

from engine.transfer import to_device

ENGINE = Path(__file__).resolve().parents[2] / "engine"
# the code every decoding iteration runs: model caches, draft trees, the decode loop, verifiers
PER_ITERATION = [
    *(ENGINE / f for f in ("decode.py", "tree.py", "runtime/eager.py", "runtime/static.py")),
    *(ENGINE / f for f in ("drafters/dynatree/plan.py", "drafters/ddtree/block_context.py")),
    *sorted((ENGINE / "draft").glob("*.py")),
    *sorted((ENGINE / "iteration").glob("*.py")),
    *sorted((ENGINE / "drafters").glob("*.py")),
    *sorted((ENGINE / "drafters").glob("*/build.py")),
    *sorted((ENGINE / "verify").glob("*.py")),
]


@pytest.mark.parametrize(
    "data, dtype, want",
    [
        ([1, 2, 3], None, torch.tensor([1, 2, 3])),
        ([1, 2], torch.long, torch.tensor([1, 2], dtype=torch.long)),
        ([0.5, 1.0], torch.float64, torch.tensor([0.5, 1.0], dtype=torch.float64)),
        (7, None, torch.tensor(7)),
        (torch.ones(2, 3, dtype=torch.bool), None, torch.ones(2, 3, dtype=torch.bool)),
        (torch.tensor([1, 2]), torch.float32, torch.tensor([1.0, 2.0])),
    ],
)
def test_to_device_gives_torch_tensors_values(data, dtype, want):
    got = to_device(data, "cpu", dtype)
    assert got.dtype == want.dtype and got.device.type == "cpu" and torch.equal(got, want)


def test_a_copy_towards_the_host_waits_for_the_values(monkeypatch):
    """Only host-to-device copies may skip the wait: a non-blocking copy to the CPU could be
    read before it lands. The meta device stands in for a GPU (its copies fail, after the
    call shows which form was asked for)."""
    asked = []
    real = torch.Tensor.to

    def to(self, *args, **kwargs):
        asked.append(kwargs.get("non_blocking", False))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "to", to)
    to_device([1, 2], "meta")
    with pytest.raises(NotImplementedError):
        to_device(torch.zeros(2, device="meta"), "cpu")
    assert asked == [True, False]


def test_per_iteration_code_copies_to_the_device_without_synchronising():
    blocking = re.compile(r"torch\.tensor\([^)]*device=|\.to\((dev|device|self\.device)\)")
    found = [
        f"{path.relative_to(ENGINE.parent)}:{i}: {line.strip()}"
        for path in PER_ITERATION
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if blocking.search(line)
    ]
    assert not found, "use engine.transfer.to_device:\n" + "\n".join(found)
