"""orchestrator.run.jobs._submit: a cluster that has no job agent yet is asked again until the
deadline; any other refusal, or the deadline passed, is one ConfigError line."""

from __future__ import annotations

import pytest

from engine.config import ConfigError
from orchestrator.run import jobs

BUSY = RuntimeError("Request failed with status code 500: No available agent to submit job")


class Client:
    def __init__(self, refusals: list[Exception]):
        self.refusals, self.calls = list(refusals), 0

    def submit_job(self, **job):
        self.calls += 1
        if self.refusals:
            raise self.refusals.pop(0)
        return f"raysubmit_{job['entrypoint']}"


@pytest.fixture
def clock(monkeypatch):
    """time.monotonic advanced by each time.sleep, with nothing slept."""
    now = [0.0]
    monkeypatch.setattr(jobs.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(jobs.time, "sleep", lambda s: now.__setitem__(0, now[0] + s))
    return now


def test_no_agent_yet_is_retried_until_one_answers(clock):
    client = Client([BUSY] * 20)  # 60 s of "no agent" on a busy head, then one answers
    assert jobs._submit(client, wait_s=120, entrypoint="x") == "raysubmit_x"
    assert client.calls == 21 and clock[0] == 60


def test_no_agent_past_the_deadline_is_one_line(clock):
    client = Client([BUSY] * 100)
    with pytest.raises(ConfigError) as e:
        jobs._submit(client, wait_s=30, entrypoint="x")
    assert str(e.value).startswith("the Ray Jobs API refused the job: Request failed")
    assert 10 <= client.calls <= 12 and clock[0] <= 33


def test_another_refusal_is_not_retried(clock):
    client = Client([RuntimeError("Request failed with status code 400: bad runtime_env")])
    with pytest.raises(ConfigError, match="refused the job: .*bad runtime_env"):
        jobs._submit(client, entrypoint="x")
    assert client.calls == 1


def test_a_sweeps_prompt_files_travel_with_its_job(tmp_path):
    """`orch submit --address http://...`: the job's working directory holds the sweep file
    and each prompt file it names, its path rewritten to that copy; the copy validates there
    to the same trials (the same sha256), wherever the original lived."""
    from orchestrator.spec import load_sweep

    own = tmp_path / "elsewhere" / "own.jsonl"
    own.parent.mkdir()
    own.write_text('{"q": "one"}\n{"q": "two"}\n')
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "name: j\npairs: [{target: tiny-llama, draft: tiny-llama-draft}]\n"
        "dataset:\n  - {name: spec_bench, prompts: 1}\n"
        "  - {path: elsewhere/own.jsonl, field: q, prompts: 2}\n"
        "methods: [{name: linear}]\n"
    )
    sweep, trials = load_sweep(spec)
    work = tmp_path / "job"
    work.mkdir()
    staged = jobs.stage_sweep(spec, sweep, work)
    assert (work / "prompts" / "1" / "own.jsonl").read_bytes() == own.read_bytes()
    own.unlink()  # the head has only the job's directory
    again, staged_trials = load_sweep(staged)
    assert [t.config_hash for t in staged_trials] == [t.config_hash for t in trials]
    assert again.datasets[1].path == str(work / "prompts" / "1" / "own.jsonl")
