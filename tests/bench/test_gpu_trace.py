"""python -m bench.gpu.trace at toy sizes: profiled ops per token on each engine, and fewer on
our own forward (ENGINE+lean)."""

import json

import pytest

from bench.gpu import trace
from tests.bench.gpu_helpers import finite_positive


def test_gpu_trace_counts_ops_per_token_on_each_engine(tmp_path):
    """bench/trace.py at toy sizes: per engine, the profiled ops per token and their time
    (CPU ops here, CUDA kernels on a GPU), ranked, written to JSON."""
    out = tmp_path / "trace.json"
    argv = ["--tiny", "--engines", "fast,graphs", "--tokens", "4", "--top", "3"]
    assert trace.main(argv + ["--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert set(report["engines"]) == {"fast", "graphs"}
    for r in report["engines"].values():
        assert r["unit"] == "cpu ops" and len(r["top"]) == 3
        finite_positive(r["per_token"], "ops per token")
        finite_positive(r["ms_per_token"], "ms per token")
        assert r["top"][0]["ms_per_token"] >= r["top"][-1]["ms_per_token"]
    with pytest.raises(SystemExit):
        trace.parse_args(["--engines", "turbo"])


def test_gpu_trace_counts_fewer_ops_per_token_on_the_lean_forward(tmp_path):
    """Fused projections: 4 matrix products per layer instead of 7, so fewer ops per token
    even where the elementwise work runs as torch ops (the CPU)."""
    out = tmp_path / "trace.json"
    argv = ["--tiny", "--engines", "fast,fast+lean", "--tokens", "4", "--top", "3"]
    assert trace.main([*argv, "--out", str(out)]) == 0
    engines = json.loads(out.read_text())["engines"]
    assert engines["fast+lean"]["per_token"] < engines["fast"]["per_token"]
