"""Targets larger than one GPU, placed (engine/placement.py) on Ray actors that each reserve
several GPUs: `ray.init(num_gpus=4)` on this CPU machine fakes four GPUs (Ray's resources),
`placement: {gpus_per_trial: 2, offload: cpu, gpu_memory: ...}` makes two actors of two GPUs
each, the target's device map is planned over its actor's two GPUs with what does not fit
offloaded, and the offload hooks run on the CPU at tiny scale: greedy output equal to
autoregressive decoding, and the placement recorded per trial. What a GPU adds (the layers on
their GPUs, the offloaded ones crossing PCIe) is named in docs/models.md."""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner

from orchestrator.records import TrialConfig
from orchestrator.run.executors import Job
from tests.hub_cache import save_tiny
from tests.orchestrator.orch_helpers import REPO

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow

PLACEMENT = {"gpus_per_trial": 2, "offload": "cpu", "gpu_memory": "400KiB"}


@pytest.fixture(scope="module")
def fake_gpus():
    if ray.is_initialized():
        ray.shutdown()
    ray.init(
        num_gpus=4,
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}},
    )
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return str(save_tiny("tiny-llama", root / "t")), str(save_tiny("tiny-llama-draft", root / "d"))


class ListSink:
    def __init__(self):
        self.started, self.results, self.failures = [], {}, {}

    def start(self, job, worker):
        self.started.append(worker)
        return True

    def done(self, job, result):
        self.results[job.trial_id] = (job, result)

    def failed(self, job, failure):
        self.failures[job.trial_id] = failure

    def retry(self, job, error):
        raise AssertionError(error)

    def stop_requested(self):
        return False


def test_each_actor_reserves_its_gpus_and_runs_the_planned_offloaded_target(fake_gpus, folders):
    from engine.datasets import load_prompts
    from orchestrator.run.executors.ray_executor import RayExecutor

    target, draft = folders
    prompts = load_prompts("spec_bench", 2)
    jobs = []
    for i, (method, params) in enumerate(
        [("autoregressive", {}), ("linear", {"k": 3}), ("fixed_tree", {"depth": 2, "branch": 2})]
    ):
        cfg = TrialConfig(
            target=target,
            draft=draft,
            dataset="spec_bench",
            prompts=2,
            prompt_tokens=12,
            method=method,
            params={**params, "verifier": "greedy"},
            max_new_tokens=8,
            device="cpu",
            dtype="float32",
            placement=PLACEMENT,
        )
        jobs.append(Job(trial_id=i, config=cfg, prompts=prompts))
    sink = ListSink()
    ex = RayExecutor(max_attempts=1)
    ex.run(jobs, sink)
    assert not sink.failures, sink.failures
    assert ex._options == {"num_gpus": 2, "num_cpus": 0}  # two GPUs reserved per actor
    reserved = {w.gpu_id for w in sink.started}
    assert reserved and all(len(g.split(",")) == 2 for g in reserved), reserved
    tokens = {}
    for job, r in sink.results.values():
        assert len(r.gpu_id.split(",")) == 2 and r.device_name.endswith(" x2 +offload cpu")
        placed = r.models[0]["placement"]  # the target's; the draft is not placed
        assert placed["gpus_per_trial"] == 2 and placed["executed_on"] == "cpu"
        dmap = placed["device_map"]
        assert set(dmap.values()) <= {0, 1, "cpu"} and "cpu" in dmap.values()
        assert placed["offloaded"] == sum(v == "cpu" for v in dmap.values()) > 0
        assert "placement" not in r.models[1]
        tokens[job.config.method] = [p["tokens"] for p in r.per_prompt]
    assert tokens["linear"] == tokens["fixed_tree"] == tokens["autoregressive"]  # greedy-exact


SWEEP = """\
name: placed
pairs: [{{target: {target}, draft: {draft}}}]
dataset: {{name: spec_bench, prompts: 1, prompt_tokens: 12}}
max_new_tokens: 6
device: cpu
dtype: float32
placement: {{gpus_per_trial: 2, offload: cpu, gpu_memory: 400KiB}}
methods: [{{name: autoregressive}}, {{name: linear, params: {{k: 2}}}}]
"""


def test_a_sweeps_placement_is_in_each_trial_and_its_record(fake_gpus, folders, tmp_path):
    from orchestrator.cli import main

    spec, db = tmp_path / "placed.yaml", tmp_path / "placed.db"
    spec.write_text(SWEEP.format(target=folders[0], draft=folders[1]))
    r = CliRunner().invoke(main, ["submit", str(spec), "--db", f"sqlite:///{db}"])
    assert r.exit_code == 0, r.output
    con = sqlite3.connect(db)
    rows = con.execute("select config, status, gpu_id, device_name from trials").fetchall()
    assert len(rows) == 2
    for config, status, gpu_id, device_name in rows:
        assert status == "done" and len(gpu_id.split(",")) == 2
        assert json.loads(config)["placement"] == {
            "gpus_per_trial": 2,
            "offload": "cpu",
            "gpu_memory": "400KiB",
        }
        assert device_name.endswith(" x2 +offload cpu")  # a profile and a result per placement
    stored = json.loads(con.execute("select spec from sweeps").fetchone()[0])
    assert stored["placement"]["gpus_per_trial"] == 2


def test_a_profile_is_per_placement(folders):
    """A profile trial of a placed pair measures the placed target, stored under the device
    name with the placement's suffix (the cost model then predicts per placement); the draft's
    curve is its own device's."""
    from orchestrator.records import PROFILE
    from orchestrator.run.trial import run_trial

    cfg = TrialConfig(
        target=folders[0],
        draft=folders[1],
        dataset="",
        prompts=0,
        method=PROFILE,
        params={"sizes": [1, 2], "contexts": [16], "repeats": 1},
        max_new_tokens=0,
        device="cpu",
        dtype="float32",
        placement=PLACEMENT,
    )
    r = run_trial(cfg)
    target, draft = (p["curve"]["device_name"] for p in r.profiles)
    assert target == draft + " x2 +offload cpu" == r.device_name
    assert r.profiles[0]["info"]["device_name"] == target
