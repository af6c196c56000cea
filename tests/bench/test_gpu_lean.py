"""The GPU benchmarks' runs of our own forward (engine/lean_model.py, ENGINE+lean) at toy sizes
on the CPU: bench/gpu.py's autoregressive section and its table, bench/gpu_exact.py and
bench/gpu_trace.py, each beside Hugging Face's forward as the lease runs them."""

import json

from bench.gpu import __main__ as gpu
from bench.gpu import exact as gpu_exact
from bench.gpu import trace as gpu_trace


def test_gpu_times_autoregressive_decoding_on_both_forwards(tmp_path, capsys):
    out = tmp_path / "gpu.json"
    argv = ["--tiny", "--engines", "fast,fast+lean", "--models", "qwen2.5-0.5b", "--pairs", ""]
    assert gpu.main([*argv, "--no-hf", "--no-kernel", "--out", str(out)]) == 0
    ar = json.loads(out.read_text())["models"]["qwen2.5-0.5b"]["autoregressive"]
    assert set(ar) == {"ours_fast", "ours_fast+lean"}
    assert ar["ours_fast+lean"]["ms_per_token"] > 0 and ar["ours_fast+lean"]["over_floor"] > 0
    table = capsys.readouterr().out.split("on our forward")[1]
    assert "| qwen2.5-0.5b | fast |" in table


def test_gpu_exact_runs_every_method_on_the_lean_forward(tmp_path, capsys):
    out = tmp_path / "exact.json"
    argv = ["--device", "cpu", "--families", "llama", "--engines", "fast+lean,graphs+lean"]
    argv += ["--methods", "autoregressive,dynatree,ddtree", "--new-tokens", "12", "--prompts", "1"]
    assert gpu_exact.main([*argv, "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert {r["engine"] for r in rows} == {"fast+lean", "graphs+lean"} and len(rows) == 6
    assert all(r["equal"] for r in rows)


def test_gpu_trace_counts_fewer_ops_per_token_on_the_lean_forward(tmp_path):
    """Fused projections: 4 matrix products per layer instead of 7, so fewer ops per token
    even where the elementwise work runs as torch ops (the CPU)."""
    out = tmp_path / "trace.json"
    argv = ["--tiny", "--engines", "fast,fast+lean", "--tokens", "4", "--top", "3"]
    assert gpu_trace.main([*argv, "--out", str(out)]) == 0
    engines = json.loads(out.read_text())["engines"]
    assert engines["fast+lean"]["per_token"] < engines["fast"]["per_token"]
