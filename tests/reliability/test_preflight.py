"""orchestrator.run.preflight: how a sweep will run is checked before anything is written."""

from __future__ import annotations

import socket
import time

import pytest
import torch

from orchestrator.run.preflight import PreflightError, check_address, check_run
from orchestrator.run.runner import RunOptions


@pytest.fixture
def listening():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield f"127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.parametrize("address", ["head node", "host:", "host:0", "host:70000", "ray://x"])
def test_malformed_addresses(address):
    with pytest.raises(PreflightError, match="is not auto, local, HOST:PORT or ray://HOST:PORT"):
        check_address(address)


def test_reachable_and_refused(listening):
    check_address(listening)
    check_address("ray://" + listening)
    check_address("local")
    port = int(listening.rsplit(":", 1)[1])
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    assert closed != port
    start = time.monotonic()
    with pytest.raises(PreflightError, match=f"cannot reach the Ray cluster at 127.0.0.1:{closed}"):
        check_address(f"127.0.0.1:{closed}")
    assert time.monotonic() - start < 6


def test_auto_needs_a_running_cluster(tmp_path, monkeypatch, listening):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    with pytest.raises(PreflightError, match="--address auto: no Ray cluster runs on this machine"):
        check_address("auto")
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text(listening + "\n")
    check_address("auto")
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    with pytest.raises(PreflightError, match="cannot reach the Ray cluster at 127.0.0.1:1"):
        check_address("auto")


def test_devices_and_gpus():
    check_run(RunOptions(executor="local"), {"cpu", "auto"})
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    with pytest.raises(PreflightError, match=f"device 'cuda:{n}'"):
        check_run(RunOptions(executor="local"), {f"cuda:{n}"})
    if n == 0:
        with pytest.raises(PreflightError, match="--accelerator gpu: this machine has no GPU"):
            check_run(RunOptions(executor="ray", accelerator="gpu", actors=2), {"auto"})
    else:
        with pytest.raises(PreflightError, match=f"--actors {n + 1} with --accelerator gpu"):
            check_run(RunOptions(executor="ray", accelerator="gpu", actors=n + 1), {"auto"})
