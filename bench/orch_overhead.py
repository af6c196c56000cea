"""Per-trial orchestration overhead of `orch submit` on Ray: scheduling plus database writes
against trial time, for a 100-trial sweep on 2 CPU actors (tiny models).

    python bench/orch_overhead.py [--trials 100] [--actors 2] [--db URL] [--tokens 16]

Measured (all from one run through orchestrator.run.runner.submit, Ray executor):
- trial_s: time inside run_trial on the actor (model load included in each actor's first).
- driver_s per trial: the driver's database work for it (claim pending->running + result
  write), and its share of the sweep's wall time.
- actor gap per trial: idle time on an actor between the end of one trial and the start of
  the next (what scheduling costs the actor; trials are pipelined two deep).
- busy: sum of trial time / (actors x time from the first trial start to the last end).
- overhead per trial: (actors x that span - sum of trial time) / trials.
Goals: overhead per trial <= 0.5 s, busy >= 90%.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SWEEP = """\
name: bench-overhead
pairs: [{{target: tiny-llama, draft: tiny-llama-draft}}]
dataset: {{name: spec_bench, prompts: 1, prompt_tokens: 16}}
max_new_tokens: {tokens}
repeats: {repeats}
warmup: 1
methods:
  - name: autoregressive
  - name: linear
    grid: {{k: [1, 2, 3, 4]}}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=100, help="a multiple of 5")
    ap.add_argument("--actors", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=16, help="max_new_tokens per trial")
    ap.add_argument("--db", default=None, help="default: a temporary SQLite file")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "orch_overhead.json"))
    args = ap.parse_args()

    import ray

    from orchestrator.run import runner

    records: dict[int, dict] = {}
    driver_s: dict[int, float] = defaultdict(float)

    class Timed(runner.DriverSink):
        def start(self, job, worker):
            t0 = time.perf_counter()
            ok = super().start(job, worker)
            driver_s[job.trial_id] += time.perf_counter() - t0
            return ok

        def done(self, job, result):
            t0 = time.perf_counter()
            super().done(job, result)
            driver_s[job.trial_id] += time.perf_counter() - t0
            records[job.trial_id] = {
                "actor": job.worker.name,
                "start": result.started_at,
                "end": result.finished_at,
                "load_s": result.load_s,
            }

    runner.DriverSink = Timed
    tmp = tempfile.mkdtemp(prefix="orch-bench-")
    url = args.db or f"sqlite:///{tmp}/bench.db"
    spec = Path(tmp) / "sweep.yaml"
    spec.write_text(SWEEP.format(tokens=args.tokens, repeats=args.trials // 5))
    ray.init(
        num_cpus=args.actors,
        num_gpus=0,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}},
    )
    t0 = time.perf_counter()
    summary = runner.submit(
        spec,
        url,
        runner.RunOptions(executor="ray", actors=args.actors, progress=False),
        log=lambda _: None,
    )
    wall = time.perf_counter() - t0
    ray.shutdown()

    n = len(records)
    trial_s = [r["end"] - r["start"] for r in records.values()]
    first, last = min(r["start"] for r in records.values()), max(r["end"] for r in records.values())
    span = last - first
    by_actor = defaultdict(list)
    for r in records.values():
        by_actor[r["actor"]].append(r)
    gaps = []
    for rs in by_actor.values():
        rs.sort(key=lambda r: r["start"])
        gaps += [b["start"] - a["end"] for a, b in zip(rs, rs[1:])]
    busy = sum(trial_s) / (len(by_actor) * span)
    result = {
        "trials": n,
        "actors": len(by_actor),
        "done": summary.done,
        "db": url.split(":")[0],
        "trial_s_mean": statistics.mean(trial_s),
        "trial_s_median": statistics.median(trial_s),
        "driver_db_s_per_trial_mean": statistics.mean(driver_s.values()),
        "driver_db_s_per_trial_max": max(driver_s.values()),
        "actor_gap_s_mean": statistics.mean(gaps) if gaps else 0.0,
        "actor_gap_s_max": max(gaps) if gaps else 0.0,
        "overhead_s_per_trial": (len(by_actor) * span - sum(trial_s)) / n,
        "busy_fraction": busy,
        "span_s": span,
        "wall_s": wall,
        "startup_s": wall - span,
        "model_loads": sum(1 for r in records.values() if r["load_s"] > 0),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    ok = result["overhead_s_per_trial"] <= 0.5 and busy >= 0.9
    print(
        f"{n} trials on {len(by_actor)} actors: trial {result['trial_s_mean']:.3f}s mean, "
        f"driver db {1e3 * result['driver_db_s_per_trial_mean']:.1f} ms/trial, actor gap "
        f"{1e3 * result['actor_gap_s_mean']:.1f} ms, overhead "
        f"{result['overhead_s_per_trial']:.3f} s/trial, busy {100 * busy:.1f}% "
        f"({'meets' if ok else 'misses'} the goals: <= 0.5 s, >= 90%)"
    )


if __name__ == "__main__":
    main()
