"""bench/gpu.py end to end at tiny sizes on the CPU (the GPU run is the same code at the real
shapes), the bandwidth-floor arithmetic, and the prediction from a per-iteration record."""

import json
import math
from pathlib import Path

import pytest
import torch

from bench import gpu, gpu_models, gpu_predict, gpu_sections
from bench.gpu_models import ARCHS, build, floor_seconds, kv_bytes_per_token, weight_bytes_read
from engine.decode import generate
from engine.models import Pair


def finite_positive(x, where: str) -> None:
    assert isinstance(x, (int, float)) and math.isfinite(x) and x > 0, (where, x)


def tiny_record(path, prompt_tokens: int = 12, new_tokens: int = 6) -> dict:
    """A bench/cost_model.py-format record (per-iteration profiles) from tiny generations of
    the bench's own random pair."""
    spec = ARCHS["qwen2.5-0.5b"].tiny()
    cpu = torch.device("cpu")
    target = build(ARCHS["qwen2.5-1.5b"].tiny(), cpu, torch.float32, 0)
    draft = build(
        spec, cpu, torch.float32, 0
    )  # tiny: the same shapes and seed, every draft accepted
    pair = Pair(gpu_sections.loaded("t", target), gpu_sections.loaded("d", draft))
    ids = list(range(1, prompt_tokens + 1))
    per_prompt = {}
    for text in ("autoregressive", "linear:k=3", "fixed_tree:depth=2,branch=2,budget=6"):
        name, params = gpu_predict.parse_method(text)
        g = generate(pair, ids, name, new_tokens, params=params)
        per_prompt[text] = [{"prompt_tokens": len(ids), **g.stats.to_dict()}]
    record = {"bench": "cost_model", "per_prompt": per_prompt}
    path.write_text(json.dumps(record))
    return record


def test_floor_is_weight_and_kv_bytes_over_bandwidth():
    cpu = torch.device("cpu")
    tied = build(ARCHS["qwen2.5-0.5b"].tiny(), cpu, torch.float32, 0)  # tied embeddings
    untied = build(ARCHS["llama-2-7b"].tiny(), cpu, torch.float32, 0)
    params = sum(p.numel() for p in tied.parameters())
    assert weight_bytes_read(tied) == 4 * params  # the tied matrix is the LM head, read once
    emb = untied.get_input_embeddings().weight.numel()
    assert weight_bytes_read(untied) == 4 * (sum(p.numel() for p in untied.parameters()) - emb)
    cfg = untied.config  # 2 layers, 4 KV heads of 16, keys and values, fp32
    assert kv_bytes_per_token(cfg, torch.float32) == 2 * 2 * 4 * 16 * 4
    assert kv_bytes_per_token(cfg, torch.bfloat16) == 2 * 2 * 4 * 16 * 2
    assert floor_seconds(1000, 10, 50, 1e3) == pytest.approx(1.5)  # (1000 + 50 * 10) / 1000
    with pytest.raises(ValueError):
        floor_seconds(1000, 10, 50, 0.0)
    # published shapes: parameter counts as the model cards give them
    meta = torch.device("meta")
    counts = {
        n: sum(p.numel() for p in build(s, meta, torch.bfloat16, 0).parameters())
        for n, s in ARCHS.items()
    }
    assert counts["qwen2.5-0.5b"] == 494_032_768 and counts["llama-2-7b"] == 6_738_415_616
    assert 1.54e9 < counts["qwen2.5-1.5b"] < 1.55e9 and 7.61e9 < counts["qwen2.5-7b"] < 7.62e9


def test_gpu_tiny_end_to_end(tmp_path, capsys):
    record = tmp_path / "record.json"
    tiny_record(record)
    out = tmp_path / "gpu.json"
    argv = ["--tiny", "--out", str(out), "--record", str(record), "--repeats", "2"]
    argv += ["--sizes", "1,4,16", "--contexts", "16", "--models", "qwen2.5-0.5b,qwen2.5-1.5b"]
    argv += ["--pairs", "qwen2.5-1.5b/qwen2.5-0.5b"]
    assert gpu.main(argv) == 0
    report = json.loads(out.read_text())
    assert report["tiny"] is True and report["dtype"] == "float32"
    assert report["skipped"] == [] and report["errors"] == []
    finite_positive(report["bandwidth"]["bytes_per_s"], "bandwidth")
    assert set(report["models"]) == {"qwen2.5-0.5b", "qwen2.5-1.5b"}
    for name, m in report["models"].items():
        for k in ("params", "weight_bytes_read", "kv_bytes_per_token", "floor_ms_per_token"):
            finite_positive(m[k], f"{name} {k}")
        assert set(m["autoregressive"]) == {"ours_eager", "ours_fast", "hf_greedy"}
        for contender, r in m["autoregressive"].items():
            finite_positive(r["ms_per_token"], f"{name} {contender}")
            assert r["over_floor"] == pytest.approx(r["ms_per_token"] / m["floor_ms_per_token"])
        assert 0 < m["autoregressive"]["ours_fast"]["host_share"] < 1
        # the same runs timed the pre-session-8 way, beside (engine/clock.py synchronised)
        finite_positive(m["autoregressive"]["ours_fast"]["ms_per_token_synchronised"], name)
        pts = m["curves"]["fast"]["points"]
        assert sorted((c, n) for c, n, _ in pts) == [(16, 1), (16, 4), (16, 16)]
        for _c, n, s in pts:
            finite_positive(s, f"{name} curve {n}")
        assert [r["n"] for r in m["verification"]["fast"]] == [1, 4, 16]
        assert m["verification"]["fast"][0]["over_one"] == 1.0
    pair = report["pairs"]["qwen2.5-1.5b/qwen2.5-0.5b"]
    assert set(pair["methods"]) == {"linear:k=3", "fixed_tree:depth=2,branch=2,budget=6"}
    for text, r in pair["methods"].items():
        for k in ("iteration_ms", "host_ms_per_iteration", "mean_tree_size"):
            finite_positive(r[k], f"{text} {k}")
        assert 0 < r["host_share"] < 1
        finite_positive(r["synchronised"]["iteration_ms"], f"{text} synchronised")
        assert r["synchronised"]["mean_tree_size"] == r["mean_tree_size"]  # the same trees
    assert pair["methods"]["linear:k=3"]["mean_tree_size"] == 4  # root + 3, random weights
    finite_positive(pair["hf_assisted"]["as_shipped"]["ms_per_token"], "HF as shipped")
    const = pair["hf_assisted"]["constant_k"]
    assert const["k"] == 3
    finite_positive(const["draft_forwards_per_iteration"], "HF draft forwards")
    finite_positive(const["ms_per_iteration"], "HF constant k")
    pred = pair["prediction"]
    assert pred["available"] is True
    assert pred["hf_assisted"]["record_method"] == "linear:k=3"
    assert set(pred["methods"]) == {
        "autoregressive",
        "linear:k=3",
        "fixed_tree:depth=2,branch=2,budget=6",
    }
    assert pred["methods"]["autoregressive"]["speedup_vs_ar"] == pytest.approx(1.0)
    for text, r in pred["methods"].items():
        for k in ("ms_per_token", "speedup_vs_ar", "vs_hf_assisted", "tokens_per_iteration"):
            finite_positive(r[k], f"prediction {text} {k}")
    assert pred["best_tree"]["method"] == "fixed_tree:depth=2,branch=2,budget=6"
    assert report["kernel"]["skipped"].startswith("no CUDA")
    profile = json.loads((tmp_path / "gpu_profile.json").read_text())
    assert profile["device"] == report["device"] and len(profile["curves"]) == 2
    from engine.profile import ForwardCurve

    for c in profile["curves"]:
        finite_positive(ForwardCurve.from_dict(c).cost(8, 16), "profile cost")
    # importable as the docstring says: orchestrator/results/profiles.py save_curves
    from orchestrator.results.profiles import load_profiles, save_curves
    from orchestrator.store import Store

    store = Store(f"sqlite:///{tmp_path / 'orch.db'}", mode="create")
    save_curves(store, [(ForwardCurve.from_dict(c), profile["device"]) for c in profile["curves"]])
    stored = load_profiles(store, report["device"]["device_name"])
    assert sorted(r["model"] for r in stored) == ["qwen2.5-0.5b-tiny", "qwen2.5-1.5b-tiny"]
    printed = capsys.readouterr().out
    assert "| qwen2.5-1.5b |" in printed and "| linear:k=3 |" in printed
    assert printed.count("synchronised timing") == 2  # the autoregressive and the pair tables


def test_time_limit_skips_sections_and_still_writes(tmp_path):
    out = tmp_path / "gpu.json"
    argv = ["--tiny", "--out", str(out), "--time-limit-s", "0", "--models", "llama-2-7b"]
    assert gpu.main([*argv, "--pairs", ""]) == 0
    report = json.loads(out.read_text())
    assert report["models"] == {} and report["errors"] == []
    assert report["skipped"] == ["building llama-2-7b: time limit 0 s reached"]
    finite_positive(report["bandwidth"]["bytes_per_s"], "bandwidth")


def test_a_failing_measurement_is_listed_and_the_run_goes_on(tmp_path, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(gpu, "curve", boom)
    out = tmp_path / "gpu.json"
    argv = ["--tiny", "--out", str(out), "--models", "llama-2-7b", "--pairs", "", "--repeats", "1"]
    assert gpu.main(argv) == 1
    report = json.loads(out.read_text())
    assert report["errors"] == ["llama-2-7b fast curve: RuntimeError: boom"]
    assert report["models"]["llama-2-7b"]["autoregressive"]["ours_fast"]["ms_per_token"] > 0
    assert report["models"]["llama-2-7b"]["curves"] == {}


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--engines", "warp"], "unknown engine 'warp'"),
        (["--models", "gpt-5"], "unknown model or pair 'gpt-5'"),
        (["--methods", "nosuch"], "'nosuch' is not in the record"),
    ],
)
def test_bad_input_fails_before_any_model(monkeypatch, capsys, argv, message):
    monkeypatch.setattr(gpu_models, "build", lambda *a, **k: pytest.fail("built a model"))
    with pytest.raises(SystemExit) as e:
        gpu.main(["--tiny", *argv])
    assert message in capsys.readouterr().err + str(e.value)


def test_default_record_is_the_newest_per_iteration_one(tmp_path):
    assert gpu.default_record(tmp_path) == gpu.RECORD
    (tmp_path / "methods.json").write_text(json.dumps({"bench": "methods"}))
    (tmp_path / "broken.json").write_text("{")
    for name, when in (("a.json", "2026-11-24 10:00:00"), ("b.json", "2026-11-25 09:00:00")):
        (tmp_path / name).write_text(json.dumps({"bench": "cost_model", "time": when}))
    assert gpu.default_record(tmp_path) == tmp_path / "b.json"


def test_predict_from_totals_only_record_is_not_available():
    record = json.loads(gpu.RECORD.read_text())  # bench/methods.py format: per-prompt totals
    text, k, tau = gpu_predict.linear_tau(record)
    assert text == "linear" and k == 4 and tau > 1
    curve = {
        "model": "m",
        "device_name": "d",
        "dtype": "float32",
        "engine": "fast",
        "points": [[0, 1, 0.01]],
    }
    pred = gpu_predict.predict_pair(
        record, curve, curve, {}, 0.0, {"k": 4, "ms_per_iteration": 20.0}
    )
    assert pred["available"] is False and "per-iteration" in pred["reason"]
    assert pred["hf_assisted"]["ms_per_token"] == pytest.approx(20.0 / tau)


@pytest.mark.parametrize("shape", ["llama-2-7b", "qwen2.5-7b"])
def test_kernel_section_runs_interpreted(shape):
    pytest.importorskip("triton")
    """The CUDA-only kernel section's call into bench/tree_attention.py, at tiny head shapes
    under TRITON_INTERPRET=1 (the test suite's setting): a check that it runs, not timing."""
    model = build(ARCHS[shape].tiny(), torch.device("cpu"), torch.float32, 0)
    args = gpu.parse_args(["--tiny"])
    res = gpu_sections.kernel_section(model, args, cuda=False)
    (row,) = [r for r in res["results"] if not r["reorder"]]
    assert row["max_abs_diff_vs_sdpa"] < 1e-2


def test_gpu_exact_checks_each_engine_against_autoregressive(tmp_path, capsys):
    from bench import gpu_exact

    out = tmp_path / "exact.json"
    argv = ["--device", "cpu", "--families", "llama", "--engines", "eager,fast"]
    argv += ["--methods", "linear,dynatree", "--new-tokens", "8", "--prompts", "1"]
    assert gpu_exact.main([*argv, "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["method"], r["engine"]) for r in rows] == [
        ("linear", "eager"),
        ("dynatree", "eager"),
        ("linear", "fast"),
        ("dynatree", "fast"),
    ]
    assert all(r["equal"] and r["reads_per_iteration"] >= 1 for r in rows)
    assert "4/4 cases equal to autoregressive" in capsys.readouterr().out


def test_gpu_exact_learned_cases_train_toy_checkpoints_in_a_new_home(tmp_path, monkeypatch):
    from bench import gpu_exact

    monkeypatch.setenv("ORCH_HOME", str(tmp_path / "user_home"))
    out = tmp_path / "exact.json"
    argv = ["--device", "cpu", "--families", "neox", "--engines", "graphs", "--learned"]
    argv += ["--methods", "autoregressive", "--new-tokens", "8", "--prompts", "1"]
    assert gpu_exact.main([*argv, "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["method"] for r in rows] == ["autoregressive", "delayed+nde", "ddtree+block"]
    assert all(r["equal"] for r in rows)
    assert not (tmp_path / "user_home").exists()  # the toy checkpoints went elsewhere


def test_from_report_predicts_again_from_a_stored_gpu_run(tmp_path, capsys):
    """The H100 run's report (its time limit cut the prediction) with every method of the CPU
    record predicted from its own curves and host times, no model built."""
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "again.json"
    argv = ["--from-report", str(root / "bench/records/gpu_h100.json"), "--out", str(out)]
    assert gpu.main(argv + ["--record", str(root / "bench/records/cost_model_real_pair.json")]) == 0
    pred = json.loads(out.read_text())["pairs"]["qwen2.5-1.5b/qwen2.5-0.5b"]["prediction"]
    assert pred["available"]
    rows = pred["methods"]
    assert rows["autoregressive"]["speedup_vs_ar"] == pytest.approx(1.0)
    for text in ("linear:k=4", "dynatree", "salf", "ddtree"):
        finite_positive(rows[text]["speedup_vs_ar"], text)
    assert pred["best_tree"]["method"] in rows
    assert "Predicted on this device" in capsys.readouterr().out


def test_gpu_trace_counts_ops_per_token_on_each_engine(tmp_path):
    """bench/gpu_trace.py at toy sizes: per engine, the profiled ops per token and their time
    (CPU ops here, CUDA kernels on a GPU), ranked, written to JSON."""
    from bench import gpu_trace

    out = tmp_path / "trace.json"
    argv = ["--tiny", "--engines", "fast,graphs", "--tokens", "4", "--top", "3"]
    assert gpu_trace.main(argv + ["--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert set(report["engines"]) == {"fast", "graphs"}
    for r in report["engines"].values():
        assert r["unit"] == "cpu ops" and len(r["top"]) == 3
        finite_positive(r["per_token"], "ops per token")
        finite_positive(r["ms_per_token"], "ms per token")
        assert r["top"][0]["ms_per_token"] >= r["top"][-1]["ms_per_token"]
    with pytest.raises(SystemExit):
        gpu_trace.parse_args(["--engines", "turbo"])
