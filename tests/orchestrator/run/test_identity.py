"""A trial's identity names where it ran (device and dtype `auto` resolved before hashing),
a sweep's identity is its trial set (an edited file is refused unless --replace), and results
can be measured again on purpose (`orch submit --rerun`, `orch delete`)."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from click.testing import CliRunner
from sqlalchemy import func, select

from db.models import Result, Sweep, SweepStatus, SweepTrial, Trial, TrialStatus
from engine.curves import device_info
from engine.models import auto_dtype, load_model
from orchestrator.cli import main
from orchestrator.records import TrialConfig
from orchestrator.run import preflight
from orchestrator.run.preflight import placement
from orchestrator.run.runner import RunOptions
from orchestrator.spec import load_sweep
from orchestrator.spec.expand import place
from orchestrator.store import Store
from orchestrator.store.sweeps import SweepChanged
from tests.orchestrator.orch_helpers import fake_config, fake_result

TINY = "pairs: [{target: tiny-llama, draft: tiny-llama-draft}]\n"
REAL = "pairs: [{target: qwen2.5-coder-1.5b, draft: qwen2.5-coder-0.5b}]\n"
BODY = (
    "dataset: {name: humaneval, prompts: 1}\nmax_new_tokens: 8\n"
    "methods: [{name: linear, params: {k: 2}}]\n"
)


def _sweep(tmp_path, pairs=TINY, extra="", name="s"):
    p = tmp_path / f"{name}.yaml"
    p.write_text(f"name: {name}\n{pairs}{BODY}{extra}")
    return load_sweep(p)[1]


# ----------------------------------------------------------------------------- item 1


def test_auto_device_and_dtype_are_resolved_per_placement(tmp_path):
    (tiny,) = _sweep(tmp_path)
    (real,) = _sweep(tmp_path, REAL)
    assert (tiny.device, tiny.dtype) == ("auto", "auto")  # the file says auto
    (tiny_cpu,) = place([tiny], "cpu")
    (tiny_gpu,) = place([tiny], "cuda")
    (real_cpu,) = place([real], "cpu")
    (real_gpu,) = place([real], "cuda")
    assert (tiny_cpu.device, tiny_cpu.dtype, tiny_cpu.draft_dtype) == ("cpu", "float32", None)
    assert (tiny_gpu.device, tiny_gpu.dtype) == ("cuda", "float32")  # tiny models stay fp32
    assert (real_cpu.device, real_cpu.dtype) == ("cpu", "float32")
    assert (real_gpu.device, real_gpu.dtype, real_gpu.draft_dtype) == ("cuda", "bfloat16", None)
    # a CPU run and a GPU run of one file are two trials, not one
    assert tiny_cpu.config_hash != tiny_gpu.config_hash
    assert real_cpu.config_hash != real_gpu.config_hash


def test_explicit_configs_keep_their_hashes(tmp_path):
    """Golden values computed at 34bdc65, before device/dtype resolution existed (humaneval:
    spec_bench's default category changed since, on purpose): explicit configs keep
    their identity, and `auto` placed on the CPU is the same trial as explicit cpu/float32."""
    (cpu,) = _sweep(tmp_path, extra="device: cpu\ndtype: float32\n", name="c")
    (gpu,) = _sweep(tmp_path, REAL, extra="device: cuda\ndtype: bfloat16\n", name="g")
    assert place([cpu], "cuda") == [cpu] and place([gpu], "cpu") == [gpu]
    assert cpu.config_hash == "1ac6c2f6d5cd23351dfe944f361f2223e684f474fbd74032059aadd9e14bb75a"
    assert gpu.config_hash == "548e0a2543885ce790a6c8926f6db05fd593a54da70c6d4b7dd165cdac813d7d"
    (auto,) = place(_sweep(tmp_path), "cpu")
    assert auto.config_hash == cpu.config_hash
    # an explicit device with dtype auto: the dtype is resolved on that device
    (dev,) = place(_sweep(tmp_path, REAL, extra="device: cuda:1\n", name="d"), "cpu")
    assert (dev.device, dev.dtype) == ("cuda:1", "bfloat16")


def test_roles_resolve_their_own_dtype():
    cfg = TrialConfig(
        target="tiny-llama",
        draft="qwen2.5-coder-0.5b",
        dataset="spec_bench",
        prompts=1,
        method="linear",
        params={"k": 2},
        max_new_tokens=8,
    )
    (both,) = place([cfg], "cuda")
    assert (both.dtype, both.draft_dtype) == ("float32", "bfloat16")  # as load_pair loads them
    (cpu,) = place([cfg], "cpu")
    assert (cpu.dtype, cpu.draft_dtype) == ("float32", None)
    per_role = dataclasses.replace(cfg, target="qwen2.5-coder-1.5b", dtype="float16")
    (x,) = place([dataclasses.replace(per_role, draft_dtype="auto")], "cuda")
    assert (x.dtype, x.draft_dtype) == ("float16", "bfloat16")
    (none,) = place([dataclasses.replace(cfg, draft="none", method="autoregressive")], "cuda")
    assert none.draft_dtype is None


def test_auto_dtype_is_what_loading_gives():
    m = load_model("tiny-llama", device="cpu", dtype="auto")
    assert str(m.dtype) == f"torch.{auto_dtype('tiny-llama', 'cpu')}"
    assert auto_dtype("qwen2.5-coder-0.5b", "cpu") == "float32"
    assert auto_dtype("qwen2.5-coder-0.5b", "cuda:0") == "bfloat16"


def test_placement_follows_the_executor(monkeypatch):
    local = "cuda" if torch.cuda.is_available() else "cpu"
    assert placement(RunOptions(executor="local")) == local
    assert placement(RunOptions(executor="ray", accelerator="gpu")) == "cuda"
    assert placement(RunOptions(executor="ray", accelerator="cpu")) == "cpu"
    # auto: what the Ray executor's plan sees (the local Ray, or the cluster at --address),
    # not the driver's own hardware
    monkeypatch.setattr(preflight, "_local_gpus", lambda: 2)
    assert placement(RunOptions(executor="ray")) == "cuda"
    monkeypatch.setattr(preflight, "_local_gpus", lambda: 0)
    assert placement(RunOptions(executor="ray")) == "cpu"
    asked = []
    monkeypatch.setattr(preflight, "_cluster_gpus", lambda a: asked.append(a) or 4)
    assert placement(RunOptions(executor="ray", address="head:6379")) == "cuda"
    assert asked == ["head:6379"]


def test_submit_stores_the_resolved_device(tmp_path, sqlite_url):
    p = tmp_path / "s.yaml"
    p.write_text(f"name: s\n{TINY}{BODY}")
    r = CliRunner().invoke(main, ["submit", str(p), "--db", sqlite_url, "--executor", "local"])
    assert r.exit_code == 0, r.output
    store = Store(sqlite_url, mode="read")
    with store.Session() as s:
        ((cfg, name),) = s.execute(select(Trial.config, Trial.device_name)).all()
    store.close()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    assert (cfg["device"], cfg["dtype"], cfg["draft_dtype"]) == (device, "float32", None)
    # and the model name of the device it measured on, per trial, in the export too
    assert name and name == device_info(device)["device_name"]
    r = CliRunner().invoke(main, ["export", "--format", "json", "--db", sqlite_url])
    assert r.exit_code == 0 and json.loads(r.stdout)[0]["device_name"] == name


# ----------------------------------------------------------------------------- helpers


def _count(store, model, *where):
    with store.Session() as s:
        return s.scalar(select(func.count()).select_from(model).where(*where))


def _finish(store, sid, trials, throughput=100.0):
    ids = {c.config_hash: i for i, c, _ in store.runnable(sid)}
    for cfg in trials:
        if cfg.config_hash in ids:
            assert store.mark_running(ids[cfg.config_hash], "h", None)
            store.record_result(ids[cfg.config_hash], fake_result(cfg, throughput=throughput))
    store.finish_run(sid)


def _throughputs(store):
    with store.Session() as s:
        return dict(s.execute(select(Result.config_hash, Result.throughput)).all())


# ----------------------------------------------------------------------------- item 3


def test_a_changed_trial_set_is_refused_then_replaced(db_url):
    store = Store(db_url)
    trials = [fake_config(i) for i in range(1, 6)]
    a = store.submit("s", {"name": "s"}, trials, "v")
    _finish(store, a.sweep_id, trials)
    store.submit("t", {"name": "t"}, trials[4:], "v")  # another sweep holds trial 5
    edited = trials[:2] + [fake_config(9)]
    with pytest.raises(SweepChanged) as e:
        store.submit("s", {"name": "s"}, edited, "v")
    msg = str(e.value)
    assert "\n" not in msg and "has 5 trials and this file gives 3" in msg
    assert "1 added" in msg and "3 removed" in msg and "--replace" in msg
    assert _count(store, Trial) == 5 and _count(store, SweepTrial) == 6  # nothing written
    b = store.submit("s", {"name": "s"}, edited, "v", replace=True)
    assert (b.total, b.new, b.done, b.added, b.removed, b.deleted) == (3, 1, 2, 1, 3, 2)
    # the unchanged trials keep their results; trials 3 and 4 are gone with theirs; trial 5
    # stays: sweep t holds it
    left = _throughputs(store)
    assert set(left) == {trials[i].config_hash for i in (0, 1, 4)}
    assert _count(store, Trial) == 4
    # the same file again is no change
    assert store.submit("s", {"name": "s"}, edited, "v").total == 3
    store.close()


def test_the_auto_device_change_is_named(db_url):
    store = Store(db_url)
    old = fake_config(1)
    assert old.device == "auto"
    store.submit("s", {"name": "s"}, [old], "v")
    with pytest.raises(
        SweepChanged, match="1 of the removed were stored with device or dtype auto"
    ):
        store.submit("s", {"name": "s"}, place([old], "cpu"), "v")
    store.close()


def test_cli_refuses_an_edited_file_then_replaces(tmp_path, sqlite_url):
    p = tmp_path / "s.yaml"
    p.write_text(f"name: s\n{TINY}{BODY.replace('params: {k: 2}', 'grid: {k: [1, 2, 3]}')}")
    run = ["submit", str(p), "--db", sqlite_url, "--executor", "local"]
    assert CliRunner().invoke(main, run).exit_code == 0
    p.write_text(f"name: s\n{TINY}{BODY.replace('params: {k: 2}', 'grid: {k: [1, 2]}')}")
    r = CliRunner().invoke(main, run)
    assert r.exit_code == 2 and r.stdout == ""
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("error: sweep 's' has 3 trials and this file gives 2: 1 removed")
    r = CliRunner().invoke(main, [*run, "--replace"])
    assert r.exit_code == 0, r.output
    assert "trials replaced: 0 added, 1 removed (1 deleted with their results)" in r.stderr
    assert "2 trials (0 new, 2 already done)" in r.stderr
    assert "ran 0" in r.stdout


# ----------------------------------------------------------------------------- item 2


def test_rerun_replaces_each_result_in_place(db_url):
    store = Store(db_url)
    trials = [fake_config(i) for i in range(1, 4)]
    sid = store.submit("s", {"name": "s"}, trials, "v").sweep_id
    _finish(store, sid, trials, throughput=100.0)
    info = store.submit("s", {"name": "s"}, trials, "v", rerun=True)
    assert (info.done, info.rerun) == (3, 3)
    assert _count(store, Trial, Trial.status == TrialStatus.PENDING) == 3
    assert set(_throughputs(store).values()) == {100.0}  # the old results stand meanwhile
    assert store.sweep("s")["status"] == SweepStatus.SUBMITTED
    _finish(store, sid, trials[:2], throughput=250.0)  # interrupted after two
    got = _throughputs(store)
    assert [got[t.config_hash] for t in trials] == [250.0, 250.0, 100.0]
    assert _count(store, Result) == 3
    _finish(store, sid, trials[2:], throughput=250.0)
    assert set(_throughputs(store).values()) == {250.0}
    assert store.sweep("s")["status"] == SweepStatus.FINISHED
    # a duplicate result of a done trial is still ignored: the first one stands
    assert store.runnable(sid, reopen=False) == []
    with store.Session() as s:
        first = s.scalar(select(Trial.id).where(Trial.config_hash == trials[0].config_hash))
    store.record_result(first, fake_result(trials[0], throughput=1.0))
    assert _throughputs(store)[trials[0].config_hash] == 250.0
    store.close()


def test_cli_rerun_measures_again(tmp_path, sqlite_url):
    p = tmp_path / "s.yaml"
    p.write_text(f"name: s\n{TINY}{BODY}")
    run = ["submit", str(p), "--db", sqlite_url, "--executor", "local"]
    assert CliRunner().invoke(main, run).exit_code == 0
    store = Store(sqlite_url, mode="read")
    with store.Session() as s:
        before = s.scalar(select(Trial.finished_at))
    r = CliRunner().invoke(main, run)
    assert "ran 0" in r.stdout
    r = CliRunner().invoke(main, [*run, "--rerun"])
    assert r.exit_code == 0, r.output
    assert "1 done trials to measure again" in r.stderr and "ran 1 (1 done" in r.stdout
    with store.Session() as s:
        after = s.scalar(select(Trial.finished_at))
        assert s.scalar(select(func.count()).select_from(Result)) == 1
    store.close()
    assert after > before  # the new measurement's result and worker times


def test_cli_delete_asks_then_deletes(tmp_path, db_url):
    store = Store(db_url)
    trials = [fake_config(i) for i in range(1, 4)] + [fake_config(method="autoregressive")]
    sid = store.submit("s", {"name": "s"}, trials, "v").sweep_id
    _finish(store, sid, trials)
    store.submit("t", {"name": "t"}, trials[:1], "v")
    base = ["delete", "--sweep", "s", "--where", "method=linear", "--db", db_url]
    r = CliRunner().invoke(main, base, input="n\n")
    assert r.exit_code == 130 and "delete 3 results of sweep 's' (1 shared" in r.stderr
    assert _count(store, Result) == 4
    r = CliRunner().invoke(main, base, input="y\n")
    assert r.exit_code == 0, r.output
    assert "deleted 3 results of sweep 's'" in r.stdout
    assert _count(store, Result) == 4 - 3
    assert _count(store, Trial, Trial.status == TrialStatus.PENDING) == 3
    assert {x["sweep"]: x["status"] for x in store.counts()} == {
        "s": SweepStatus.SUBMITTED,
        "t": SweepStatus.SUBMITTED,
    }
    r = CliRunner().invoke(main, [*base[:3], "--yes", "--db", db_url])
    assert r.exit_code == 0 and "deleted 1 results" in r.stdout and _count(store, Result) == 0
    r = CliRunner().invoke(main, ["delete", "--sweep", "nope", "--yes", "--db", db_url])
    assert r.exit_code == 2 and r.stderr.startswith("error: no sweep named 'nope'")
    with store.Session() as s:
        assert s.scalar(select(func.count()).select_from(Sweep)) == 2
    store.close()
