"""Helpers shared by the orchestrator tests (tests.orchestrator.orch_helpers; the driver and
writer processes, started as scripts from HELPERS, import it the same way)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HELPERS = Path(__file__).resolve().parent  # driver_proc.py, writer_proc.py: run as scripts
PG_PASSWORD = "Pw-never-shown-7Q"
PG_ADMIN = os.environ.get("ORCH_TEST_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres")

# 2 pairs x (autoregressive 1 + linear 5 + fixed_tree 3 x 2) = 24 configs.
SWEEP_24 = """\
name: {name}
pairs:
  - {{target: tiny-llama, draft: tiny-llama-draft}}
  - {{target: tiny-neox, draft: tiny-neox-draft}}
dataset: {{name: spec_bench, prompts: {prompts}, prompt_tokens: 16}}
sampling: {{temperature: 0.0}}
max_new_tokens: {max_new_tokens}
repeats: 1
warmup: 0
methods:
  - name: autoregressive
  - name: linear
    grid: {{k: [1, 2, 3, 4, 5]}}
  - name: fixed_tree
    grid: {{depth: [2, 3, 4], branch: [1, 2]}}
"""


def sweep_24(path: Path, name: str = "tiny24", prompts: int = 1, max_new_tokens: int = 8) -> Path:
    path.write_text(SWEEP_24.format(name=name, prompts=prompts, max_new_tokens=max_new_tokens))
    return path


def orch(
    *args: str, env: dict | None = None, timeout: float = 300, **kw
) -> subprocess.CompletedProcess:
    """Run `python -m orchestrator.cli ARGS` in a fresh process from the repository root."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", *args],
        cwd=REPO,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kw,
    )


def fake_config(
    i: int = 0,
    method: str = "linear",
    target: str = "tiny-llama",
    draft: str = "tiny-llama-draft",
    repeat: int = 0,
    max_new_tokens: int = 8,
    **params,
):
    """A TrialConfig without touching the engine (writers and report tests)."""
    from orchestrator.records import TrialConfig

    params = params or ({"k": i} if method == "linear" else {})
    return TrialConfig(
        target=target,
        draft=draft,
        dataset="spec_bench",
        prompts=1,
        method=method,
        params={**params, "verifier": "greedy"},
        max_new_tokens=max_new_tokens,
        repeat=repeat,
        seed=repeat,
    )


def fake_result(cfg, throughput: float = 100.0, **metrics):
    """A TrialResult with every metric set (throughput and anything given, else 1.0)."""
    import time

    from orchestrator.records import METRICS, TrialResult

    values = {m: 1.0 for m in METRICS}
    values.update(
        new_tokens=8,
        iterations=4,
        prompts=1,
        peak_memory_bytes=1 << 20,
        throughput=throughput,
        **metrics,
    )
    now = time.time()
    return TrialResult(
        config_hash=cfg.config_hash,
        metrics=values,
        per_prompt=[{"id": "p0", "tokens": [1, 2, 3]}],
        per_iteration=[{"accepted": [1, 2], "tree_size": [3, 3]}],
        host="testhost",
        gpu_id=None,
        started_at=now - 0.5,
        finished_at=now,
        code_version="test",
        models=[
            {
                "name": cfg.target,
                "architecture": "llama",
                "parameters": 10,
                "vocab_size": 260,
                "layers": 4,
                "dtype": "float32",
            }
        ],
    )


def record_sweep(store, name: str, trials: list) -> int:
    """Submit sweep `name` with the configs of `trials` [(config, result)], record every result
    as one driver would, finish the run; returns the sweep id."""
    sid = store.submit(name, {"name": name}, [c for c, _ in trials], "v").sweep_id
    store.begin_run(sid)
    ids = {c.config_hash: i for i, c, _ in store.runnable(sid)}
    for cfg, res in trials:
        store.mark_running(ids[cfg.config_hash], "h", None)
        store.record_result(ids[cfg.config_hash], res)
    store.finish_run(sid)
    return sid


# one pair, autoregressive and one linear config: a sweep that runs in seconds
TINY_SWEEP = """\
name: {name}
pairs:
  - {{target: tiny-llama, draft: tiny-llama-draft}}
dataset: {{name: spec_bench, prompts: 1, prompt_tokens: 16}}
max_new_tokens: 4
repeats: 1
warmup: 0
methods:
  - name: autoregressive
  - name: linear
    grid: {{k: [2]}}
"""


def tiny_sweep(tmp_path: Path, name: str = "quiet") -> Path:
    """TINY_SWEEP named `name`, written to tmp_path/NAME.yaml."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(TINY_SWEEP.format(name=name))
    return path


def tiny_trial(**kw):
    """A TrialConfig on the tiny pair that run_trial runs in seconds (linear k=3, 2 prompts of
    16 tokens, 12 new tokens); `kw` replaces fields."""
    from orchestrator.records import TrialConfig

    base = dict(
        target="tiny-llama",
        draft="tiny-llama-draft",
        dataset="spec_bench",
        prompts=2,
        prompt_tokens=16,
        method="linear",
        params={"k": 3, "verifier": "greedy"},
        max_new_tokens=12,
    )
    return TrialConfig(**{**base, **kw})


# `orch train nde` at toy scale on the tiny pair (add --name, --steps)
NDE_TOY = [
    "train", "nde", "--target", "tiny-llama", "--draft", "tiny-llama-draft",
    "--prompts", "2", "--prompt-tokens", "12", "--max-new-tokens", "8", "--stride", "4",
    "--samples", "1", "--k-max", "2", "--l1-max", "2", "--l2-max", "2",
    "--temperature", "1.0", "--profile-sizes", "1,4", "--profile-contexts", "16",
    "--batch-size", "4", "--save-every", "2",
]  # fmt: skip


def stub_eagle_heads(sweep_text: str, monkeypatch, home: Path) -> list[str]:
    """For a sweep file that drafts with named heads (`eagle:NAME`): ORCH_HOME set to `home`
    with a finished stub checkpoint of kind "eagle" for each, so that the file validates and
    expands without the trained heads (nothing loads a draft while a sweep expands); the
    names. Without such heads nothing changes."""
    import re

    from engine import checkpoint  # lazy: torch

    names = sorted(set(re.findall(r"\beagle:([A-Za-z0-9][\w.-]*)", sweep_text)))
    if names:
        monkeypatch.setenv("ORCH_HOME", str(home))
    for name in names:
        checkpoint.save(name, "eagle", {"weights": {}}, {"stub": True}, step=1, done=True)
    return names
