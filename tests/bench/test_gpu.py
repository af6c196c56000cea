"""python -m bench.gpu end to end at tiny sizes on the CPU (the GPU run is the same code at the
real shapes): every section and its JSON, the time limit, a failing measurement, bad input,
predictions again from a stored report, and autoregressive decoding on our own forward
(engine/runtime/lean.py, ENGINE+lean) beside Hugging Face's as the lease runs it."""

import json
from pathlib import Path

import pytest
import torch

from bench.gpu import __main__ as gpu
from bench.gpu import models
from bench.gpu.models import ARCHS, build, loaded
from bench.gpu.predict import parse_method
from engine.cost_model import ForwardCurve
from engine.decode import generate
from engine.models import Pair
from orchestrator.results.profiles import load_profiles, save_curves
from orchestrator.store import Store
from tests.bench.gpu_helpers import finite_positive


def tiny_record(path, prompt_tokens: int = 12, new_tokens: int = 6) -> dict:
    """A bench/cost_model.py-format record (per-iteration profiles) from tiny generations of
    the bench's own random pair."""
    spec = ARCHS["qwen2.5-0.5b"].tiny()
    cpu = torch.device("cpu")
    target = build(ARCHS["qwen2.5-1.5b"].tiny(), cpu, torch.float32, 0)
    draft = build(
        spec, cpu, torch.float32, 0
    )  # tiny: the same shapes and seed, every draft accepted
    pair = Pair(loaded("t", target), loaded("d", draft))
    ids = list(range(1, prompt_tokens + 1))
    per_prompt = {}
    for text in ("autoregressive", "linear:k=3", "fixed_tree:depth=2,branch=2,budget=6"):
        name, params = parse_method(text)
        g = generate(pair, ids, name, new_tokens, params=params)
        per_prompt[text] = [{"prompt_tokens": len(ids), **g.stats.to_dict()}]
    record = {"bench": "cost_model", "per_prompt": per_prompt}
    path.write_text(json.dumps(record))
    return record


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
    for c in profile["curves"]:
        finite_positive(ForwardCurve.from_dict(c).cost(8, 16), "profile cost")
    # importable as the docstring says: orchestrator/results/profiles.py save_curves
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
    monkeypatch.setattr(models, "build", lambda *a, **k: pytest.fail("built a model"))
    with pytest.raises(SystemExit) as e:
        gpu.main(["--tiny", *argv])
    assert message in capsys.readouterr().err + str(e.value)


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


def test_gpu_times_autoregressive_decoding_on_both_forwards(tmp_path, capsys):
    out = tmp_path / "gpu.json"
    argv = ["--tiny", "--engines", "fast,fast+lean", "--models", "qwen2.5-0.5b", "--pairs", ""]
    assert gpu.main([*argv, "--no-hf", "--no-kernel", "--out", str(out)]) == 0
    ar = json.loads(out.read_text())["models"]["qwen2.5-0.5b"]["autoregressive"]
    assert set(ar) == {"ours_fast", "ours_fast+lean"}
    assert ar["ours_fast+lean"]["ms_per_token"] > 0 and ar["ours_fast+lean"]["over_floor"] > 0
    table = capsys.readouterr().out.split("on our forward")[1]
    assert "| qwen2.5-0.5b | fast |" in table
