"""The Ray executor on this CPU machine with `ray.init(num_gpus=2)`: actors pinned to GPU ids
0 and 1, each pair loaded once per actor, a killed actor's trial retried, a raising trial
recorded as failed, results equal to the local executor's; and `orch submit` on Ray."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.records import TrialConfig
from orchestrator.run.executors import Job
from tests.orchestrator.orch_helpers import PG_PASSWORD, REPO, sweep_24

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def ray_session():
    if ray.is_initialized():
        ray.shutdown()
    ray.init(
        num_gpus=2,
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}},
    )
    yield ray
    ray.shutdown()


class ListSink:
    def __init__(self):
        self.started, self.results, self.failures, self.retried = [], {}, {}, []

    def start(self, job, worker):
        self.started.append((job.trial_id, worker))
        return True

    def done(self, job, result):
        assert job.trial_id not in self.results
        self.results[job.trial_id] = (job, result)

    def failed(self, job, failure):
        self.failures[job.trial_id] = (job, failure)

    def retry(self, job, error):
        self.retried.append((job.trial_id, error))

    def stop_requested(self):
        return False


def _jobs() -> list[Job]:
    from engine.datasets import load_prompts

    prompts = load_prompts("spec_bench", 1)
    out = []
    for family in ("llama", "neox"):
        for method, params in [
            ("autoregressive", {}),
            ("linear", {"k": 3}),
            ("fixed_tree", {"depth": 3, "branch": 2, "budget": 8}),
        ]:
            cfg = TrialConfig(
                target=f"tiny-{family}",
                draft=f"tiny-{family}-draft",
                dataset="spec_bench",
                prompts=1,
                prompt_tokens=16,
                method=method,
                params={**params, "verifier": "greedy"},
                max_new_tokens=10,
            )
            out.append(Job(trial_id=len(out), config=cfg, prompts=prompts))
    bad = TrialConfig(
        target="tiny-llama",
        draft="tiny-llama-draft",
        dataset="spec_bench",
        prompts=1,
        method="linear",
        params={"k": 0},
        max_new_tokens=10,
    )
    out.append(Job(trial_id=len(out), config=bad, prompts=prompts))
    return out


def _signature(result) -> tuple:
    m = result.metrics
    return (
        [p["tokens"] for p in result.per_prompt],
        m["new_tokens"],
        m["iterations"],
        m["acceptance_rate"],
        m["tokens_per_iteration"],
    )


@pytest.fixture(scope="module")
def local_results():
    from orchestrator.run.executors.local import LocalExecutor

    sink = ListSink()
    LocalExecutor().run(_jobs(), sink)
    return sink


def test_gpu_pinning_loads_failures_and_equality(ray_session, local_results):
    from orchestrator.run.executors.ray_executor import RayExecutor

    ex = RayExecutor(max_attempts=3)
    sink = ListSink()
    jobs = _jobs()
    ex.run(jobs, sink)
    assert sorted(s.worker.gpu_id for s in ex.slots) == ["0", "1"]
    assert {r.gpu_id for _, r in sink.results.values()} == {"0", "1"}
    assert {w.gpu_id for _, w in sink.started} == {"0", "1"}
    # each actor loaded each pair it used exactly once
    assert ex.load_counts and all(n == 1 for c in ex.load_counts.values() for n in c.values())
    assert set().union(*ex.load_counts.values()) == {
        "tiny-llama/tiny-llama-draft",
        "tiny-neox/tiny-neox-draft",
    }
    # the raising trial failed, the rest went on
    assert set(sink.failures) == {6} and "k must be >= 1" in sink.failures[6][1].error
    assert set(sink.results) == set(range(6)) and not sink.retried
    assert set(local_results.failures) == {6}
    for i in range(6):
        assert _signature(sink.results[i][1]) == _signature(local_results.results[i][1])


def test_killed_actor_trial_is_retried(ray_session, local_results):
    from orchestrator.run.executors.ray_executor import RayExecutor

    ex = RayExecutor(max_attempts=3)

    class KillOnce(ListSink):
        killed = None

        def done(self, job, result):
            super().done(job, result)
            if self.killed is None:  # kill the actor while it still has a trial queued
                slot = next(s for s in ex.slots if s.worker == job.worker)
                assert slot.inflight
                self.killed = slot.worker
                ray.kill(slot.actor, no_restart=True)

    sink = KillOnce()
    jobs = _jobs()[:6]
    ex.run(jobs, sink)
    assert sink.retried, "the killed actor's queued trial was not retried"
    assert set(sink.results) == set(range(6)) and not sink.failures
    retried = {i for i, _ in sink.retried}
    assert all(sink.results[i][0].attempts == 2 for i in retried)
    assert all(sink.killed.name in e and "died" in e for _, e in sink.retried)
    assert len(ex.slots) == 2 and sink.killed not in [s.worker for s in ex.slots]
    for i in range(6):
        assert _signature(sink.results[i][1]) == _signature(local_results.results[i][1])


def test_an_actor_ray_cannot_place_does_not_hold_up_the_sweep(ray_session, monkeypatch):
    """Three GPU actors on two GPUs (as when a worker node has just died and the cluster still
    counts its GPU): the two placed run every trial (before, the driver waited for all three
    forever; CI 2026-11-28)."""
    from orchestrator.run.executors import ray_executor as rx

    monkeypatch.setattr(rx, "SPREAD_WAIT_S", 2.0)
    ex = rx.RayExecutor(actors=3, accelerator="gpu")
    sink = ListSink()
    ex.run(_jobs()[:6], sink)
    assert set(sink.results) == set(range(6)) and not sink.failures
    assert sorted(s.ready for s in ex.slots) == [False, True, True]
    assert {r.gpu_id for _, r in sink.results.values()} == {"0", "1"}


def test_no_actor_placed_is_one_error_line(ray_session, monkeypatch):
    """Actors no node can hold: after the placement timeout, one line that says what each
    actor asks for and what the cluster has, instead of waiting forever."""
    from orchestrator.run.executors import ray_executor as rx

    monkeypatch.setattr(rx, "SPREAD_WAIT_S", 0.5)
    ex = rx.RayExecutor(accelerator="gpu", placement_timeout=2.0)

    def plan(n_jobs):
        ex._options = {"num_gpus": 4, "num_cpus": 0}  # more than the 2 GPUs it has
        return 1

    monkeypatch.setattr(ex, "_plan", plan)
    sink = ListSink()
    with pytest.raises(rx.ClusterError) as e:
        ex.run(_jobs()[:2], sink)
    msg = str(e.value)
    assert msg.startswith("Ray placed none of the 1 actors in 2 s (each asks for num_gpus 4;")
    assert "GPU 2" in msg and "\n" not in msg and not sink.started


def test_orch_submit_on_ray(ray_session, pg_url, tmp_path):
    from db.models import Profile, Trial
    from orchestrator.cli import main
    from orchestrator.store import Store

    spec = tmp_path / "r.yaml"
    spec.write_text(
        sweep_24(tmp_path / "x.yaml")
        .read_text()
        .replace("grid: {k: [1, 2, 3, 4, 5]}", "grid: {k: [2]}")
        .replace("grid: {depth: [2, 3, 4], branch: [1, 2]}", "grid: {depth: [2], branch: [2]}")
        # the fake GPUs of ray_session have no CUDA behind them: `auto` would resolve to cuda
        + "device: cpu\n"
        # and a profile trial per pair: its GPU actor profiles its own device
        + "profile: {sizes: [1, 2], contexts: [4], repeats: 1}\n"
    )
    r = CliRunner().invoke(main, ["submit", str(spec), "--db", pg_url])  # ray is the default
    assert r.exit_code == 0, r.output
    assert "8 trials; ran 8 (8 done, 0 failed, 0 retried)" in r.output
    store = Store(pg_url)
    with store.Session() as s:
        gpus = {t.gpu_id for t in s.query(Trial)}
        profiled = {(t.gpu_id, t.device_name) for t in s.query(Trial).filter_by(method="profile")}
        stored = {(p.model, p.device_name) for p in s.query(Profile)}
    store.close()
    assert gpus <= {"0", "1"} and gpus
    assert {g for g, _ in profiled} <= {"0", "1"} and len(profiled) >= 1
    cpu = {d for _, d in profiled}
    models = {"tiny-llama", "tiny-llama-draft", "tiny-neox", "tiny-neox-draft"}
    assert len(cpu) == 1 and stored == {(m, *cpu) for m in models}
    assert PG_PASSWORD not in r.output
    session = Path(ray._private.worker._global_node.get_session_dir_path())
    for f in (session / "logs").glob("*"):
        if f.is_file():
            assert PG_PASSWORD not in f.read_text(errors="replace"), f


@pytest.mark.parametrize("error", ["OutOfMemoryError", "WorkerCrashedError", "NodeDiedError"])
def test_a_killed_worker_process_is_the_actor_dying(monkeypatch, error):
    """Ray's memory monitor killing an actor's process raises OutOfMemoryError (not a
    RayActorError) for its trials, and for every later call on that actor: the trial goes back
    in the queue and the actor is replaced, as for a killed actor, so one kill does not fail
    every trial that is left; after max_attempts the trial fails, naming the cause."""
    import ray.exceptions

    from orchestrator.run.executors import Worker
    from orchestrator.run.executors import ray_executor as rx

    def get(ref):
        raise getattr(ray.exceptions, error)("1 worker(s) were killed (node low on memory)")

    monkeypatch.setattr(rx.ray, "get", get)
    ex = rx.RayExecutor(max_attempts=2)
    dead = rx.Slot(actor=None, worker=Worker("actor0", "h", "0"), info=None)
    ex.slots = [dead]
    monkeypatch.setattr(ex, "_spawn", lambda hardware=None: "replacement")
    job, queues, sink = _jobs()[0], {}, ListSink()
    job.attempts = 1
    ex._collect("ref", dead, job, queues, sink)
    assert not dead.alive and ex.slots == ["replacement"]
    assert list(queues[job.config.pair_key]) == [job] and not sink.failures
    assert sink.retried and "actor0 on h (gpu 0) died" in sink.retried[0][1]
    job.attempts = 2  # dispatched again, and killed again: the last attempt
    ex._collect("ref", dead, job, {}, sink)
    assert "(attempt 2 of 2)" in sink.failures[job.trial_id][1].error
