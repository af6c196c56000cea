"""engine/clock.py: a generation's stamps; on CUDA events that wait only when resolved."""

from __future__ import annotations

import time

import pytest
import torch

from engine import clock as clock_mod
from engine.clock import Clock, synchronised
from engine.decode import generate

CUDA = torch.device("cuda")


class FakeEvent:
    """torch.cuda.Event's timing interface, on the host clock (no GPU here)."""

    waits = 0

    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing
        self.t = None

    def record(self) -> None:
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        FakeEvent.waits += 1

    def elapsed_time(self, end: FakeEvent) -> float:
        return 1e3 * (end.t - self.t)  # ms, as CUDA reports it


@pytest.fixture
def fake_cuda(monkeypatch):
    """torch.cuda.Event replaced by FakeEvent, torch.cuda.synchronize counted."""
    FakeEvent.waits = 0
    calls = []
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(device))
    return calls


def test_host_clock_seconds_and_spans():
    clock = Clock(torch.device("cpu"))
    assert not clock.events
    stamps = [clock.stamp() for _ in range(4)]
    assert stamps == [0, 1, 2, 3]
    at = clock.seconds()
    assert at[0] == 0.0 and at == sorted(at)
    assert clock.spans([(0, 1), (2, 3)]) == pytest.approx(at[1] - at[0] + at[3] - at[2])


def test_cuda_clock_waits_once_when_resolved(fake_cuda):
    clock = Clock(CUDA)
    assert clock.events
    for _ in range(5):
        clock.stamp()
        time.sleep(0.001)
    assert FakeEvent.waits == 0 and fake_cuda == []  # stamping never waits for the device
    at = clock.seconds()
    assert FakeEvent.waits == 1 and len(at) == 5 and at[0] == 0.0
    assert all(b - a >= 0.001 for a, b in zip(at, at[1:]))
    assert clock.seconds() == at and FakeEvent.waits == 1  # nothing new: no second wait
    clock.stamp()
    assert len(clock.seconds()) == 6 and FakeEvent.waits == 2
    assert fake_cuda == []


def test_synchronised_clock_waits_at_every_stamp(fake_cuda):
    with synchronised():
        clock = Clock(CUDA)
    assert not clock.events and not clock_mod.SYNCHRONISE  # restored on exit
    clock.stamp()
    clock.stamp()
    assert fake_cuda == [CUDA, CUDA] and FakeEvent.waits == 0


@pytest.mark.parametrize("engine", ["eager", "fast", "graphs"])
@pytest.mark.parametrize("method", ["autoregressive", "linear", "dynatree", "dyspec"])
def test_generation_times_add_up(llama_pair, engine, method):
    """Each stamp lands in its iteration: forwards inside their stage, stages and prefill
    within the total, the first iteration's end as the time to first token."""
    prompt = llama_pair.target.tokenizer.encode("The clock of a generation")
    stats = generate(llama_pair, prompt, method, 12, engine=engine).stats
    its = stats.iterations
    assert its and all(
        0 <= it.draft_forward_s <= it.draft_s and 0 < it.target_forward_s <= it.target_s
        for it in its
    )
    if method != "autoregressive":
        assert sum(it.draft_forward_s for it in its) > 0
    stages = [it.draft_s + it.target_s + it.verify_s + it.bookkeeping_s for it in its]
    assert min(it.verify_s for it in its) >= 0 and min(it.bookkeeping_s for it in its) >= 0
    assert stats.prefill_s + sum(stages) <= stats.total_s + 1e-9
    first = its[0]
    assert stats.prefill_s + first.draft_s + first.target_s + first.verify_s <= stats.ttft_s + 1e-9
    assert stats.ttft_s <= stats.prefill_s + stages[0] + 0.05 * stats.total_s
