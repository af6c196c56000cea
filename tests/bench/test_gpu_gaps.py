"""bench/gpu/gaps.py: the device timeline's idle gaps, charged to the engine frames that
launched the work on either side (a profiler trace built by hand here: a CPU trace has no
device events), and a toy run end to end."""

from __future__ import annotations

import json

import pytest

from bench.gpu import gaps as gpu_gaps


def frame(name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "python_function", "name": name, "ts": ts, "dur": dur, "tid": 1}


def launch(corr: int, ts: float) -> dict:
    args = {"correlation": corr}
    return {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": "cudaLaunchKernel",
        "ts": ts,
        "dur": 1,
        "tid": 1,
        "args": args,
    }


def kernel(corr: int, ts: float, dur: float, cat: str = "kernel") -> dict:
    return {
        "ph": "X",
        "cat": cat,
        "name": f"k{corr}",
        "ts": ts,
        "dur": dur,
        "tid": 7,
        "args": {"correlation": corr},
    }


TRACE = [
    frame("bench/gpu/gaps.py(150): trace", 0, 200),  # not an engine frame
    frame("engine/iteration/general.py(45): run", 0, 100),
    frame("/work/main/engine/drafters/dyspec.py(94): grow_greedy", 10, 50),
    frame("engine/draft.py(205): tree", 60, 20),
    frame("torch/nn/modules/module.py(1782): _call_impl", 62, 10),  # inside tree
    launch(1, 5),
    launch(2, 20),
    launch(3, 70),  # under tree > _call_impl: charged to tree
    launch(4, 71),
    launch(5, 150),  # outside every engine frame
    kernel(1, 6, 4),  # busy [6, 10]
    kernel(2, 21, 4),  # gap 11 before it
    kernel(3, 75, 10),  # gap 50 before it; overlapping kernel 4 merges with it
    kernel(4, 80, 10, "gpu_memcpy"),  # busy [75, 90]
    kernel(5, 93, 2),  # gap of 3: below min_gap_us
]


def test_engine_frame_names_engine_code_only():
    assert gpu_gaps.engine_frame("engine/drafters/salf.py(60): grow") == "salf.grow"
    assert gpu_gaps.engine_frame("/abs/engine/tree.py(1): ancestors") == "tree.ancestors"
    assert gpu_gaps.engine_frame("torch/nn/functional.py(10): linear") is None
    assert gpu_gaps.engine_frame("<built-in method tolist>") is None


def test_launch_stacks_are_the_enclosing_engine_frames():
    stacks = gpu_gaps.launch_stacks(TRACE)
    assert stacks[1] == "general.run"
    assert stacks[2] == "general.run > dyspec.grow_greedy"
    assert stacks[3] == stacks[4] == "general.run > draft.tree"
    assert stacks[5] == ""  # general.run ended at 100


def test_gaps_are_charged_to_the_launches_on_either_side():
    busy, gaps = gpu_gaps.device_gaps(TRACE, min_gap_us=5)
    assert busy == pytest.approx(4 + 4 + 15 + 2)
    assert [g["us"] for g in gaps] == [11, 50]
    assert gaps[0]["after"] == "general.run"
    assert gaps[0]["before"] == "general.run > dyspec.grow_greedy"
    assert gaps[1]["after"] == "general.run > dyspec.grow_greedy"
    assert gaps[1]["before"] == "general.run > draft.tree"
    s = gpu_gaps.summarise(busy, gaps, iterations=2, top=1)
    assert s["idle_ms_per_iteration"] == pytest.approx(61 / 1e3 / 2)
    assert s["busy_ms_per_iteration"] == pytest.approx(25 / 1e3 / 2)
    assert s["gaps_per_iteration"] == 1.0
    assert s["top"] == [
        {
            "after": "general.run > dyspec.grow_greedy",
            "before": "general.run > draft.tree",
            "gaps_per_iteration": 0.5,
            "idle_ms_per_iteration": pytest.approx(0.025),
        }
    ]


def test_no_device_events_no_gaps():
    cpu_only = [e for e in TRACE if e["cat"] not in gpu_gaps.DEVICE_CATEGORIES]
    assert gpu_gaps.device_gaps(cpu_only, 5) == (0.0, [])


def test_toy_run_writes_every_method(tmp_path):
    out = tmp_path / "gaps.json"
    argv = ["--tiny", "--methods", "linear:k=2,dyspec:budget=8", "--tokens", "4"]
    assert gpu_gaps.main(argv + ["--engine", "fast", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert set(report["methods"]) == {"linear:k=2", "dyspec:budget=8"}
    for r in report["methods"].values():
        assert r["iterations"] >= 1 and r["iteration_ms"] > 0
        assert r["idle_ms_per_iteration"] == 0.0  # no device events in a CPU trace
        assert r["without_stacks"]["iterations"] == r["iterations"]
    with pytest.raises(SystemExit):
        gpu_gaps.parse_args(["--engine", "turbo"])
