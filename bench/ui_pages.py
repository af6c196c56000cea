"""How fast `orch ui` serves its pages over a sweep of 5,000 finished trials: a generated
SQLite database (Store + fake results, as tests/orchestrator/orch_helpers.py builds them:
no model runs), the real HTTP server in this process, each page and JSON answer fetched cold
(the first request after the sweep changed: the results frame, intervals and figures are
computed) and warm (cached per sweep until its latest result changes; median of 5).

    python bench/ui_pages.py [--trials 5000] [--prompts 4] [--db sqlite:///PATH]
        [--out bench/results/ui_pages.json]

Goal: the sweeps page and the sweep page (HTML + the JSON its script fetches), warm, each
under 1 s on this machine. Writes JSON and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.common import markdown_table, write_record  # noqa: E402

SWEEP = "bench-ui"
PAIRS = [("tiny-llama", "tiny-llama-draft"), ("tiny-neox", "tiny-neox-draft")]
CATEGORIES = ["writing", "translation", "summarization", "qa"]


def configs(trials: int):
    """autoregressive and a dynatree grid (depth x branch x threshold) on two pairs, 4
    repeats each: `trials` trial configs in all."""
    from orchestrator.records import TrialConfig

    repeats = 4
    per_pair = trials // (len(PAIRS) * repeats)
    grid = itertools.product(range(3, 9), range(2, 6), [round(0.005 * i, 3) for i in range(1, 200)])
    points = [None] + [dict(depth=d, branch=b, threshold=t) for d, b, t in grid][: per_pair - 1]
    out = []
    for (target, draft), p, r in itertools.product(PAIRS, points, range(repeats)):
        method = "autoregressive" if p is None else "dynatree"
        out.append(TrialConfig(target=target, draft=draft, dataset="spec_bench", prompts=4,
                               method=method, params={**(p or {}), "verifier": "greedy"},
                               max_new_tokens=64, repeat=r, seed=r, device="cuda",
                               dtype="bfloat16"))  # fmt: skip
    return out


def result(cfg, i: int, prompts: int):
    from orchestrator.records import METRICS, TrialResult

    p = cfg.params
    tau = 1.0 if cfg.method == "autoregressive" else 1 + 0.3 * p["depth"] * (1 - p["threshold"])
    tput = 100.0 * (1 if cfg.method == "autoregressive" else tau / (1 + 0.08 * p["branch"]))
    tput *= 1 + 0.02 * ((i * 7919) % 11 - 5) / 5
    per_prompt = []
    for j in range(prompts):
        s = 64 / (tput * (1 + 0.05 * (j - 1.5)))
        per_prompt.append({
            "id": str(j), "category": CATEGORIES[j % 4], "prompt_tokens": 64, "tokens": [1] * 64,
            "new_tokens": 64, "iterations": round(64 / tau), "total_s": s, "throughput": 64 / s,
            "tokens_per_iteration": tau, "acceptance_rate": min(1, tau / 4),
            "draft_s": 0.3 * s, "target_s": 0.6 * s, "verify_s": 0.05 * s, "bookkeeping_s": 0.05 * s,
            "acceptance": {"delayed_acceptance_by_depth": [[9, 10, 0.9], [7, 9, 0.78]],
                           "ddtree_acceptance_length_histogram": [1, 3, 5, 2]},
            "certificate": {"check": "greedy_teacher_forced", "lossless": True, "checked": 64,
                            "first_mismatch": None},
        })  # fmt: skip
    values = {m: 0.01 for m in METRICS}
    values.update(throughput=tput, tokens_per_iteration=tau, new_tokens=64 * prompts,
                  iterations=round(64 * prompts / tau), prompts=prompts,
                  peak_memory_bytes=1 << 20, acceptance_rate=min(1, tau / 4))  # fmt: skip
    now = time.time()
    return TrialResult(
        config_hash=cfg.config_hash, metrics=values, per_prompt=per_prompt,
        per_iteration=[{"accepted": [1, 2] * 8, "tree_size": [5, 5] * 8}] * prompts,
        host=f"node{i % 4}", gpu_id=str(i % 2), started_at=now - 1 - i * 0.01, finished_at=now,
        code_version="bench", device_name="NVIDIA H200", models=[{"name": cfg.target, "architecture": "llama",
                                       "parameters": 10, "vocab_size": 260, "layers": 4,
                                       "dtype": "float32"}],
    )  # fmt: skip


def build(url: str, trials: int, prompts: int) -> float:
    from orchestrator.store import Store

    t0 = time.perf_counter()
    store = Store(url)
    cfgs = configs(trials)
    sid = store.submit(SWEEP, {"name": SWEEP, "repeats": 4}, cfgs, "bench").sweep_id
    store.begin_run(sid)
    for i, (tid, cfg, _) in enumerate(store.runnable(sid)):
        store.mark_running(tid, f"node{i % 4}", str(i % 2))
        store.record_result(tid, result(cfg, i, prompts))
    store.finish_run(sid)
    small = [c for c in cfgs[:40]]
    sid2 = store.submit("bench-ui-small", {"name": "bench-ui-small"}, small, "bench").sweep_id
    store.begin_run(sid2)
    store.finish_run(sid2)
    store.close()
    return time.perf_counter() - t0


def fetch(url: str) -> tuple[float, int]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as r:
        n = len(r.read())
    return time.perf_counter() - t0, n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=5000)
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--db", default=None, help="default: a new SQLite file in a temp folder")
    ap.add_argument("--out", default="bench/results/ui_pages.json")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="orch-ui-bench-")
    url = a.db or f"sqlite:///{tmp}/bench.db"
    build_s = build(url, a.trials, a.prompts)
    print(f"built {a.trials} trials in {build_s:.1f}s: {url}", file=sys.stderr)

    from orchestrator.ui.reader import Reader
    from orchestrator.ui.server import make_server

    reader = Reader(url)
    server = make_server(reader, "127.0.0.1", 0, log=open("/dev/null", "w"))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    tid = reader.trial_rows(SWEEP, [__import__("db.models").models.Trial.id])[0]["id"]
    pages = [
        ("sweeps page (HTML)", "/"),
        ("sweeps JSON", "/api/sweeps"),
        ("sweep page (HTML)", f"/sweep/{SWEEP}"),
        ("sweep JSON", f"/api/sweep/{SWEEP}"),
        ("sweep JSON, filtered", f"/api/sweep/{SWEEP}?where=depth%3E%3D5&where=branch%3D3"),
        ("sweep version (polled)", f"/api/sweep/{SWEEP}/version"),
        ("trial JSON", f"/api/trial/{tid}"),
        ("export CSV", f"/sweep/{SWEEP}/export.csv"),
    ]
    rows = []
    for label, path in pages:
        cold, size = fetch(base + path)
        warm = statistics.median(fetch(base + path)[0] for _ in range(5))
        rows.append({"page": label, "path": path, "cold_s": round(cold, 3),
                     "warm_s": round(warm, 4), "bytes": size})  # fmt: skip
        print(f"{label}: cold {cold:.3f}s warm {warm:.4f}s {size} bytes", file=sys.stderr)
    server.shutdown()
    reader.close()
    goal = {
        "sweeps page warm (HTML + JSON) s": round(rows[0]["warm_s"] + rows[1]["warm_s"], 4),
        "sweep page warm (HTML + JSON) s": round(rows[2]["warm_s"] + rows[3]["warm_s"], 4),
    }
    record = {"trials": a.trials, "prompts": a.prompts, "build_s": round(build_s, 1),
              "database": "sqlite" if url.startswith("sqlite") else "postgres",
              "pages": rows, "goal_under_1s": goal}  # fmt: skip
    write_record(a.out, record)
    print(markdown_table(rows, ["page", "cold_s", "warm_s", "bytes"]))
    print(json.dumps(goal))


if __name__ == "__main__":
    main()
