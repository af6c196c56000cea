"""Trials of a hardware type run only on that type: the worker refuses a trial its device is
not the type of (one line naming both, before any model loads), the local executor's preflight
refuses a type this machine is not, the Ray preflight a type the cluster has no node of, and
the Ray executor gives each type actors pinned to its nodes that draw only its trials
(tests/orchestrator/run/test_multinode.py runs that on a real cluster)."""

from __future__ import annotations

import socket
from collections import deque

import pytest
import torch

from orchestrator.run import preflight, trial, worker_hardware
from orchestrator.run.executors import Job
from orchestrator.run.executors.hardware_actors import hardware_actors
from orchestrator.run.preflight import PreflightError, check_run
from orchestrator.run.runner import RunOptions
from tests.orchestrator.orch_helpers import tiny_trial

no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without GPUs")


@no_gpu
def test_the_worker_refuses_a_trial_of_another_type(monkeypatch):
    monkeypatch.delenv(worker_hardware.STAND_IN_ENV, raising=False)
    loads = dict(trial.LOADS)
    with pytest.raises(worker_hardware.HardwareMismatch) as e:
        trial.run_trial(tiny_trial(device="cuda", hardware="H100"))
    host = socket.gethostname()
    assert str(e.value) == (
        f"hardware H100: the worker on {host} would run the trial on cpu (this worker has no "
        "GPU), not on H100 (not run)"
    )
    monkeypatch.setenv(worker_hardware.STAND_IN_ENV, "a100")  # a worker whose GPU is an A100
    with pytest.raises(
        worker_hardware.HardwareMismatch, match="would run the trial on a stand-in A100"
    ):
        trial.run_trial(tiny_trial(device="cuda", hardware="H100"))
    with pytest.raises(worker_hardware.HardwareMismatch, match="not on L4"):  # a profile trial too
        trial.run_trial(tiny_trial(device="cuda", hardware="L4", method="profile", params={}))
    assert dict(trial.LOADS) == loads  # refused before any model loaded


def test_the_worker_runs_a_trial_of_its_own_type(monkeypatch):
    monkeypatch.setenv(
        worker_hardware.STAND_IN_ENV, "H100"
    )  # the test hook: cuda trials on the CPU
    typed = trial.run_trial(tiny_trial(device="cuda", hardware="H100"))
    monkeypatch.delenv(worker_hardware.STAND_IN_ENV)
    on_cpu = trial.run_trial(tiny_trial(device="cpu", hardware="cpu"))
    plain = trial.run_trial(tiny_trial(device="cpu"))
    tokens = [p["tokens"] for p in plain.per_prompt]
    assert [p["tokens"] for p in typed.per_prompt] == tokens
    assert [p["tokens"] for p in on_cpu.per_prompt] == tokens
    assert len({typed.config_hash, on_cpu.config_hash, plain.config_hash}) == 3


@no_gpu
def test_local_preflight_refuses_a_type_this_machine_is_not():
    check_run(RunOptions(executor="local"), {"cpu"}, {"cpu", None})
    with pytest.raises(PreflightError) as e:
        check_run(RunOptions(executor="local"), {"cuda", "cpu"}, {"H100", "A100", "cpu"})
    assert str(e.value).startswith(
        "hardware A100, H100: the local executor runs trials on this machine, which has cpu "
        "(run them with --executor ray"
    )


@no_gpu
def test_ray_preflight_names_the_types_the_cluster_has(monkeypatch):
    have = {"H100": ("H100", 8.0), "A10G": ("A10G", 4.0), "cpu": ("cpu", 64.0)}
    monkeypatch.setattr(preflight, "cluster_hardware", lambda address: have)
    monkeypatch.setattr(preflight, "check_address", lambda address: None)  # it answers
    check_run(RunOptions(executor="ray"), {"cuda", "cpu"}, {"H100", "A10G", "cpu"})
    with pytest.raises(PreflightError) as e:
        check_run(RunOptions(executor="ray", address="head:6379"), {"cuda"}, {"H100", "L4"})
    assert str(e.value) == (
        "hardware L4: the Ray cluster at head:6379 has no node of that type "
        "(it has: A10G, H100, cpu)"
    )
    with pytest.raises(PreflightError, match="has no node of those types"):
        check_run(RunOptions(executor="ray"), {"cuda"}, {"L4", "T4"})
    with pytest.raises(PreflightError, match="--accelerator cpu contradicts the sweep's hardware"):
        check_run(RunOptions(executor="ray", accelerator="cpu"), {"cuda"}, {"H100"})
    with pytest.raises(PreflightError, match="--accelerator gpu contradicts the sweep's hardware"):
        check_run(RunOptions(executor="ray", accelerator="gpu", address="h:1"), {"cpu"}, {"cpu"})
    check_run(RunOptions(executor="ray"), {"auto"}, {None})  # no types named: not asked
    monkeypatch.undo()
    # without Ray running and without an address: this machine, as a local Ray would see it
    assert preflight.cluster_hardware(None) == {"cpu": ("cpu", 1.0)}


def _jobs(*hardware):
    return [Job(trial_id=i, config=tiny_trial(hardware=h)) for i, h in enumerate(hardware)]


NODES = [
    {"Alive": True, "Resources": {"CPU": 4.0, "GPU": 2.0, "accelerator_type:H100": 1.0}},
    {"Alive": True, "Resources": {"CPU": 1.0, "GPU": 1.0, "accelerator_type:a10g": 1.0}},
]


def test_each_type_gets_actors_pinned_to_its_nodes():
    jobs = _jobs("H100", "H100", "H100", "A10G", "A10G", "cpu", "L4", None)
    got = hardware_actors(jobs, NODES)
    h100 = {"num_gpus": 1, "num_cpus": 0, "accelerator_type": "H100"}
    a10g = {"num_gpus": 1, "num_cpus": 0, "accelerator_type": "a10g"}  # the node's spelling
    l4 = {"num_gpus": 1, "num_cpus": 0, "accelerator_type": "L4"}  # no node yet: one actor
    # one per GPU of the type (at most one per job), cpu one per CPU (at most one per job)
    assert got == [("H100", h100)] * 2 + [("A10G", a10g)] + [("cpu", {"num_cpus": 1})] + [
        ("L4", l4)
    ]
    assert [h for h, _ in hardware_actors(jobs, NODES, actors=3)] == ["H100"] * 3 + ["A10G"] * 2 + [
        "cpu",
        "L4",
    ]
    assert hardware_actors(_jobs(None, None), NODES) == []


def test_a_placement_reserves_its_gpus_on_each_typed_actor():
    """A sweep's placement.gpus_per_trial with a hardware type: each actor of the type asks for
    that many GPUs of it, and a node's GPUs hold that many fewer actors."""
    placed = {"gpus_per_trial": 2}
    jobs = [Job(trial_id=i, config=tiny_trial(hardware="H100", placement=placed)) for i in range(3)]
    got = hardware_actors(jobs, NODES)
    assert got == [("H100", {"num_gpus": 2, "num_cpus": 0, "accelerator_type": "H100"})]


def test_an_actor_draws_only_trials_of_its_own_type():
    from orchestrator.run.executors import Worker
    from orchestrator.run.executors.ray_executor import RayExecutor, Slot

    ex = RayExecutor()
    slots = {
        h: Slot(actor=None, worker=Worker(f"a-{h}", "h", None), info=None, hardware=h)
        for h in ("H100", "cpu", None)
    }
    ex.slots = list(slots.values())
    queues: dict = {}
    for job in _jobs("H100", "cpu", None, "H100", "cpu", None, "A100"):
        queues.setdefault(job.config.pair_key, deque()).append(job)
    for h, slot in slots.items():
        drawn = []
        while (job := ex._pick(slot, queues)) is not None:
            drawn.append(job.config.hardware)
        assert drawn == [h, h], (h, drawn)
    assert [j.config.hardware for q in queues.values() for j in q] == ["A100"]  # nobody's


def test_the_cross_hardware_example_runs_here(sqlite_url, tmp_path):
    """examples/cross_hardware.yaml (`hardware: [cpu]`) through `orch submit --executor local`:
    its results carry the type, and `--only hardware=` picks a type's trials."""
    import json

    from click.testing import CliRunner

    from orchestrator.cli import main
    from tests.orchestrator.orch_helpers import REPO

    example = str(REPO / "examples" / "cross_hardware.yaml")
    run = CliRunner().invoke(main, ["submit", example, "--db", sqlite_url, "--executor", "local"])
    assert run.exit_code == 0, run.output
    assert "4 trials (4 new, 0 already done)" in run.output
    out = CliRunner().invoke(main, ["export", "--db", sqlite_url, "--format", "json"])
    rows = json.loads(out.stdout)
    assert len(rows) == 4 and {r["hardware"] for r in rows} == {"cpu"}
    assert {r["device"] for r in rows} == {"cpu"}
    again = CliRunner().invoke(
        main, ["resume", "cross-hardware", "--db", sqlite_url, "--executor", "local"]
    )
    assert again.exit_code == 0 and "nothing to run" in again.output, again.output
    # an H100 beside: refused here, unless --only leaves its trials for a cluster
    both = tmp_path / "both.yaml"
    text = (REPO / "examples" / "cross_hardware.yaml").read_text()
    both.write_text(text.replace("hardware: [cpu]", "hardware: [cpu, H100]"))
    args = ["submit", str(both), "--db", sqlite_url, "--executor", "local", "--replace"]
    refused = CliRunner().invoke(main, args)
    assert refused.exit_code == 2 and "hardware H100: the local executor" in refused.output
    cut = CliRunner().invoke(main, [*args, "--only", "hardware=cpu"])
    assert cut.exit_code == 0, cut.output
    assert "8 trials (4 new, 4 already done)" in cut.output and "nothing to run" in cut.output
    resume = ["resume", "cross-hardware", "--db", sqlite_url, "--executor", "local"]
    refused = CliRunner().invoke(main, resume)
    assert refused.exit_code == 2 and "hardware H100: the local executor" in refused.output
    cut = CliRunner().invoke(main, [*resume, "--only", "hardware=cpu"])
    assert cut.exit_code == 0 and "nothing to run" in cut.output, cut.output


def test_unplaced_actors_say_what_each_kind_asks_for(monkeypatch):
    from orchestrator.run.executors import Worker
    from orchestrator.run.executors import ray_executor as rx

    monkeypatch.setattr(rx.ray, "available_resources", lambda: {"CPU": 2.0})
    ex = rx.RayExecutor(placement_timeout=5)
    ex._options = {"num_cpus": 1}
    ex._typed = {"L4": {"num_gpus": 1, "num_cpus": 0, "accelerator_type": "L4"}}
    ex.slots = [
        rx.Slot(actor=None, worker=Worker(f"a{i}", "?", None), info=None, hardware=h)
        for i, h in enumerate((None, "L4"))
    ]
    assert ex._unplaced().startswith(
        "Ray placed none of the 2 actors in 5 s (each asks for num_cpus 1; num_gpus 1, "
        "accelerator_type L4; the cluster has CPU 2 free)"
    )
