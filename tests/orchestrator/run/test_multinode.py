"""A real multi-node Ray cluster on this one machine: `ray start --head` plus two worker nodes
(one fake GPU each, so the two GPU actors land on distinct nodes; the first labelled an H100,
the second an A100, as Ray labels real GPU nodes), every node bound to 127.0.0.1 on ports
reserved for it and Ray's token authentication off for this private test cluster. The driver
runs `orch submit --address` with an empty ORCH_HOME and no ORCH_DATA_DIR (no model folders,
no data: docs/cluster.md); the workers have the model cache.

Checks: a `hardware: [H100, A100]` sweep runs each config once per type, each trial on a node
of its type; every config exactly one result, each trial's node recorded (a worker node,
never the head), model loads at most one per (actor, pair), and the death of a worker node's
raylet mid-sweep survived with nothing lost or run twice (that test runs last: it leaves one
worker node).
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.run.executors.reaper import session_processes
from orchestrator.run.runner import PAUSE_ENV
from tests.orchestrator.orch_helpers import REPO, sweep_24
from tests.orchestrator.run.ray_nodes import kill, ray_cluster, worker_nodes, worker_resources

pytestmark = pytest.mark.slow
psutil = pytest.importorskip("psutil")
pytest.importorskip("ray")

TYPES = ("H100", "A100")  # the worker nodes' (fake) GPU types, in node order


@pytest.fixture(scope="module")
def cluster():
    """Head + two worker nodes with one GPU each, stand-ins of the types in TYPES
    (tests/orchestrator/run/ray_nodes.py), the Jobs API on the head."""
    with ray_cluster(types=TYPES, dashboard=True) as c:
        yield c


def _orch_async(args: list[str], env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", *args],
        cwd=REPO,
        env={**env, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _driver_env(cluster: dict, tmp_path: Path) -> dict:
    env = {k: v for k, v in cluster["env"].items() if k != "ORCH_DATA_DIR"}
    env["ORCH_HOME"] = str(tmp_path / "driver-home")  # no models here
    return env


def _rows(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(db) as c:
        return c.execute(sql).fetchall()


def on_cpu(spec: Path) -> Path:
    """The sweep pinned to device cpu: the cluster's GPUs are fake (`--accelerator gpu` on a
    CPU machine), and device auto resolves to cuda on a GPU worker."""
    spec.write_text(spec.read_text() + "device: cpu\n")
    return spec


def _check_sweep(db: Path, nodes: set[str], pairs: int, actors: int) -> None:
    configs = _rows(db, "SELECT COUNT(*), COUNT(DISTINCT config_hash) FROM trials")[0]
    results = _rows(db, "SELECT COUNT(*), COUNT(DISTINCT config_hash) FROM results")[0]
    assert configs[0] == configs[1] == results[0] == results[1]  # one result per config
    assert _rows(db, "SELECT DISTINCT status FROM trials") == [("done",)]
    ran_on = {n for (n,) in _rows(db, "SELECT worker_node FROM trials")}
    assert ran_on <= nodes and ran_on, ran_on  # recorded, and a worker node (not the head)
    loads = _rows(
        db,
        "SELECT t.worker_node, t.target, COUNT(*) FROM trials t "
        "WHERE t.load_s > 0 GROUP BY t.worker_node, t.target",
    )
    assert all(n == 1 for *_, n in loads), loads  # each actor loads each pair once
    assert pairs <= len(loads) <= pairs * actors


CROSS_HARDWARE = """\
name: {name}
pairs: [{{target: tiny-llama, draft: tiny-llama-draft}}]
dataset: {{name: spec_bench, prompts: 1, prompt_tokens: 16}}
max_new_tokens: 8
hardware: {hardware}
methods: [{{name: autoregressive}}, {{name: linear, params: {{k: 2}}}}]
"""


def test_cross_hardware_sweep_runs_each_config_on_each_type(cluster, tmp_path):
    """`hardware: [H100, A100]` through `orch submit --address`: each of the 2 configs runs
    once per type (4 trials, 4 hashes), each on a node whose resources name its type, and
    the stored configs carry it. A type the cluster lacks is refused in one line before the
    database exists. Runs first: the dead-node test below leaves one worker node."""
    types = {
        node: {
            k.removeprefix("accelerator_type:") for k in res if k.startswith("accelerator_type:")
        }
        for node, res in worker_resources(cluster).items()
    }
    assert sorted(t for ts in types.values() for t in ts) == sorted(TYPES), types
    db = tmp_path / "orch.db"
    base = ["--db", f"sqlite:///{db}", "--executor", "ray", "--address", cluster["address"]]
    spec = tmp_path / "x.yaml"
    spec.write_text(CROSS_HARDWARE.format(name="xhw-absent", hardware="[H100, l4]"))
    refused = _orch_async(["submit", str(spec), *base], _driver_env(cluster, tmp_path))
    out, err = refused.communicate(timeout=300)
    assert refused.returncode == 2 and err.count("\n") == 1, err
    assert err.startswith("error: hardware L4: the Ray cluster at 127.0.0.1:"), err
    assert "has no node of that type (it has: A100, H100, cpu)" in err and not db.exists()
    spec.write_text(CROSS_HARDWARE.format(name="xhw", hardware="[H100, a100]"))
    driver = _orch_async(["submit", str(spec), *base], _driver_env(cluster, tmp_path))
    out, err = driver.communicate(timeout=600)
    assert driver.returncode == 0, err
    rows = _rows(db, "SELECT config_hash, config, worker_node, status FROM trials")
    assert len(rows) == 4 and len({h for h, *_ in rows}) == 4
    assert {s for *_, s in rows} == {"done"}
    by_config: dict[str, set[str]] = {}
    for _, config, node, _ in rows:
        config = json.loads(config)
        hw = config.pop("hardware")
        assert types[node] == {hw}, (hw, node, types)  # ran on a node of its type only
        assert config["device"] == "cuda"
        by_config.setdefault(json.dumps(config, sort_keys=True), set()).add(hw)
    assert list(by_config.values()) == [set(TYPES), set(TYPES)]  # each config once per type
    export = _orch_async(["export", "--db", f"sqlite:///{db}", "--format", "json"], cluster["env"])
    out, err = export.communicate(timeout=300)
    assert export.returncode == 0, err
    assert sorted(r["hardware"] for r in json.loads(out)) == sorted(TYPES * 2)  # result rows


def test_tiny_sweep_survives_a_dead_worker_node(cluster, tmp_path):
    """The driver is held at its 6th claim (the ORCH_TEST_PAUSE hook: both actors have run
    trials and hold more), a worker node's raylet is killed, then the driver goes on."""
    nodes = worker_nodes(cluster)
    assert len(nodes) == 2
    db = tmp_path / "orch.db"
    pause = tmp_path / "paused"
    spec = on_cpu(sweep_24(tmp_path / "s.yaml", name="multinode", prompts=2, max_new_tokens=24))
    env = {**_driver_env(cluster, tmp_path), PAUSE_ENV: f"6:{pause}"}
    args = [
        "submit",
        str(spec),
        "--db",
        f"sqlite:///{db}",
        "--executor",
        "ray",
        "--address",
        cluster["address"],
        "--accelerator",
        "gpu",
    ]
    driver = _orch_async(args, env)
    deadline = time.time() + 600
    while not pause.exists():
        assert driver.poll() is None, driver.communicate()
        assert time.time() < deadline, "the driver never reached its pause point"
        time.sleep(0.1)
    ran = {n for (n,) in _rows(db, "SELECT worker_node FROM trials WHERE worker_node NOT NULL")}
    busy = sorted(ran)[0] if ran else sorted(nodes)[0]
    victim = [
        p
        for p in session_processes(cluster["temp"])
        if "raylet" in p.name() and f"--node_id={busy}" in p.cmdline()
    ]
    assert len(victim) == 1
    kill(victim)
    pause.unlink()  # the driver goes on, with one node fewer
    out, err = driver.communicate(timeout=600)
    assert driver.returncode == 0, err
    retried = re.search(r"(\d+) retried", out + err)
    assert retried and int(retried.group(1)) >= 1, out + err  # the node died mid-sweep
    _check_sweep(db, nodes, pairs=2, actors=2)
    assert _rows(db, "SELECT COUNT(*) FROM trials")[0][0] == 24


def test_real_pair_from_a_driver_without_models(cluster, tmp_path):
    """The real pair validates by name on the driver; the worker loads it from its cache."""
    from engine.fetch import REAL_PAIR, is_fetched

    if not all(is_fetched(m) for m in REAL_PAIR):
        pytest.skip("real pair not fetched on this machine (the workers' cache)")
    nodes = worker_nodes(cluster)  # the survivors of the test above, if it ran first
    db = tmp_path / "orch.db"
    spec = tmp_path / "real.yaml"
    spec.write_text(
        f"name: real-multinode\npairs: [{{target: {REAL_PAIR[0]}, draft: {REAL_PAIR[1]}}}]\n"
        "dataset: {name: humaneval, prompts: 1, prompt_tokens: 32}\nmax_new_tokens: 6\n"
        "dtype: float32\ndevice: cpu\nmethods: [{name: autoregressive}, {name: linear, params: {k: 2}}]\n"
    )
    driver = _orch_async(
        [
            "submit",
            str(spec),
            "--db",
            f"sqlite:///{db}",
            "--executor",
            "ray",
            "--address",
            cluster["address"],
            "--accelerator",
            "gpu",
            "--actors",
            "1",
        ],
        _driver_env(cluster, tmp_path),
    )
    out, err = driver.communicate(timeout=900)
    assert driver.returncode == 0, err
    assert not (tmp_path / "driver-home" / "models").exists()
    _check_sweep(db, nodes, pairs=1, actors=1)
    from engine.fetch import REAL_MODELS

    shas = dict(_rows(db, "SELECT name, gguf_sha256 FROM models"))
    assert shas == {m: REAL_MODELS[m].sha256 for m in REAL_PAIR}  # as the worker checked it


def test_submit_through_the_ray_jobs_api(cluster, tmp_path, monkeypatch):
    """`orch submit --address http://head:8265` from a machine outside the cluster: the driver
    runs as a Ray job on the head; the database URL is not on the job's command line."""
    nodes = worker_nodes(cluster)
    db = tmp_path / "jobs.db"
    spec = on_cpu(sweep_24(tmp_path / "j.yaml", name="via-jobs"))
    driver = _orch_async(
        [
            "submit",
            str(spec),
            "--db",
            f"sqlite:///{db}",
            "--address",
            cluster["jobs"],
            "--accelerator",
            "gpu",
        ],
        _driver_env(cluster, tmp_path),
    )
    out, err = driver.communicate(timeout=600)
    assert driver.returncode == 0, err
    assert "submitted as Ray job" in err and "SUCCEEDED" in err
    _check_sweep(db, nodes, pairs=2, actors=2)
    from ray.job_submission import JobSubmissionClient

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    jobs = JobSubmissionClient(cluster["jobs"]).list_jobs()
    assert all(str(db) not in j.entrypoint for j in jobs)


def test_jobs_api_refuses_to_send_a_password(tmp_path):
    """A URL with a password would be readable in the cluster's job list: refused, one line,
    before anything is sent (no cluster needed)."""
    from tests.orchestrator.orch_helpers import PG_PASSWORD, orch

    spec = on_cpu(sweep_24(tmp_path / "p.yaml", name="pw"))
    r = orch(
        "submit",
        str(spec),
        "--address",
        "http://127.0.0.1:9",
        env={"ORCH_DB_URL": f"postgresql+psycopg://u:{PG_PASSWORD}@db/lab"},
    )
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("error: a database URL with a password is not sent")
    assert PG_PASSWORD not in r.stderr and r.stderr.count("\n") == 1
