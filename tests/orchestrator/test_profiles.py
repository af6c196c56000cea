"""Hardware profiles in the database (SQLite and Postgres), `orch profile` on tiny models, and
`orch compare --predict-on` against the cost model computed by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from orch_helpers import fake_config, fake_result, record_sweep
from sqlalchemy import func, select

from db.models import Profile
from engine.profile import CurvePoint, ForwardCurve, device_info
from orchestrator.cli import main
from orchestrator.profiles import device_curves, load_profiles, save_curves
from orchestrator.store import Store

CPU, GPU = "Test CPU 9000", "NVIDIA Test GPU"
INFO = {"driver": "", "torch": "2.x", "transformers": "5.x", "triton": "", "cores": 2, "host": "h"}


def _linear(model, device, a, b, dtype="float32", engine="eager"):
    """c(n, C) = a + b n at C = 64 and 256 (no dependence on C)."""
    pts = tuple(CurvePoint(c, n, a + b * n) for c in (64, 256) for n in (1, 2, 4, 8, 16))
    return ForwardCurve(model, device, dtype, engine, pts)


def test_profiles_round_trip_and_replace(db_url):
    store = Store(db_url)
    t, d = _linear("tiny-llama", CPU, 1.0, 0.1), _linear("tiny-llama-draft", CPU, 0.2, 0.05)
    save_curves(store, [(t, INFO), (d, INFO)])
    rows = load_profiles(store, CPU)
    assert [r["curve"] for r in rows] == [t, d]
    assert rows[0]["versions"] == {"torch": "2.x", "transformers": "5.x", "triton": ""}
    assert rows[0]["cores"] == 2 and rows[0]["created_at"] is not None
    t2 = _linear("tiny-llama", CPU, 2.0, 0.1)  # re-profiled: replaces the key's row
    save_curves(store, [(t2, INFO)])
    curves = device_curves(store, CPU)
    assert curves[("tiny-llama", "float32", "eager")] == t2
    n = store.transact("count", lambda s: s.scalar(select(func.count()).select_from(Profile)))
    assert n == 2
    save_curves(store, [(_linear("tiny-llama", CPU, 1.0, 0.1, engine="fast"), INFO)])
    assert len(device_curves(store, CPU)) == 3  # another engine is another key
    store.close()


def test_unknown_device_names_the_profiled_ones(sqlite_url):
    store = Store(sqlite_url)
    save_curves(store, [(_linear("tiny-llama", CPU, 1.0, 0.1), INFO)])
    from engine.config import ConfigError

    with pytest.raises(ConfigError, match=f"no profile for device 'H100'.*{CPU}"):
        device_curves(store, "H100")


# Per prompt of 4 tokens: autoregressive emits 4 tokens in 4 iterations; linear emits them
# in 2 iterations of a 3-node tree (2 draft forwards: 3 prompt tokens + 1 node, then 1 node).
AR_ITS = {
    "tree_size": [1] * 4,
    "accepted": [0] * 4,
    "emitted": [1] * 4,
    "draft_forwards": [0] * 4,
    "draft_tokens": [0] * 4,
}
LIN_ITS = {
    "tree_size": [3, 3],
    "accepted": [2, 1],
    "emitted": [3, 1],
    "draft_forwards": [2, 2],
    "draft_tokens": [5, 2],
}
ZERO_TIMES = ("draft_s", "target_s", "verify_s", "bookkeeping_s")


def _iters(lists, host=0.0):
    n = len(lists["tree_size"])
    times = {k: [host / 4] * n for k in ZERO_TIMES}
    return {**lists, **times, "draft_forward_s": [0.0] * n, "target_forward_s": [0.0] * n}


# linear k=3 emitting the 4 tokens in one iteration of a 4-node tree (3 draft forwards: 3
# prompt tokens + 1 node, then 1, then 1)
LIN3_ITS = {
    "tree_size": [4],
    "accepted": [3],
    "emitted": [4],
    "draft_forwards": [3],
    "draft_tokens": [6],
}


def _trial(lists, throughput, method="linear", **params):
    cfg = fake_config(method=method, **params)
    res = fake_result(cfg, throughput=throughput)
    res = type(res)(
        **{
            **res.__dict__,
            "per_prompt": [{"id": "p0", "prompt_tokens": 4, "tokens": [1, 2, 3, 4]}],
            "per_iteration": [_iters(lists, host=0.1)],
        }
    )
    return cfg, res


def _measured(url, *more):
    """Autoregressive (10 tok/s) and linear k=2 (15 tok/s) trials on the CPU, then `more`;
    the same tiny curves profiled on a CPU and a GPU."""
    store = Store(url)
    trials = [_trial(AR_ITS, 10.0, method="autoregressive"), _trial(LIN_ITS, 15.0, k=2)]
    record_sweep(store, "s", trials + list(more))
    for dev, dt in ((CPU, "float32"), (GPU, "bfloat16")):  # dtype auto resolves per device
        t = _linear("tiny-llama", dev, 1.0, 0.1, dt)
        d = _linear("tiny-llama-draft", dev, 0.2, 0.05, dt)
        save_curves(store, [(t, INFO), (d, INFO)])
    store.close()
    return url


@pytest.fixture
def measured(sqlite_url):
    return _measured(sqlite_url)


def _expected_speedup(host=0.1):
    """By hand, curves c_t = 1 + 0.1 n, c_d = 0.2 + 0.05 n, `host` s per iteration (the
    stored trials': 0.1)."""
    prefill = 1.0 + 0.1 * 3
    ar = prefill + 4 * (1.1 + host)
    # iteration 1: draft forwards of 3 + 1 and 1 tokens; iteration 2: 1 and 1
    lin = prefill + (0.4 + 0.25) + 1.3 + host + (0.25 + 0.25) + 1.3 + host
    return ar / lin


def test_compare_predicts_beside_measured(measured):
    r = CliRunner().invoke(
        main, ["compare", "--db", measured, "--predict-on", CPU, "--format", "json"]
    )
    assert r.exit_code == 0, r.output
    rows = {x["method"]: x for x in json.loads(r.stdout)}
    assert rows["linear"]["speedup"] == pytest.approx(1.5)
    assert rows["linear"]["predicted_speedup"] == pytest.approx(_expected_speedup())
    assert rows["autoregressive"]["predicted_speedup"] == pytest.approx(1.0)
    table = CliRunner().invoke(main, ["compare", "--db", measured, "--predict-on", CPU]).stdout
    assert f"1.50x (predicted {_expected_speedup():.2f}x)" in table


def test_compare_predicts_alone_on_a_device_without_runs(measured):
    r = CliRunner().invoke(main, ["compare", "--db", measured, "--predict-on", GPU])
    assert r.exit_code == 0, r.output
    assert f"predicted {_expected_speedup():.2f}x" in r.stdout and "1.50x" not in r.stdout


@pytest.mark.parametrize("host_ms", [0.0, 100.0, 500.0])
def test_predict_host_ms_replaces_every_trials_host_time(measured, host_ms):
    """--predict-host-ms: each iteration of both methods costs that long outside its forwards
    (100 ms is what the stored trials measured, so it predicts what the default does)."""
    args = ["compare", "--db", measured, "--predict-on", GPU, "--format", "json"]
    r = CliRunner().invoke(main, args + ["--predict-host-ms", str(host_ms)])
    assert r.exit_code == 0, r.output
    rows = {x["method"]: x for x in json.loads(r.stdout)}
    assert rows["linear"]["predicted_speedup"] == pytest.approx(_expected_speedup(host_ms / 1000))
    assert rows["autoregressive"]["predicted_speedup"] == pytest.approx(1.0)


@pytest.mark.parametrize("value", ["-1", "fast"])
def test_predict_host_ms_bad_value(measured, value):
    r = CliRunner().invoke(main, ["compare", "--db", measured, "--predict-host-ms", value])
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--predict-host-ms" in lines[0], lines


@pytest.mark.parametrize("ms", ["0", "1"])
def test_predict_host_ms_needs_a_device(measured, ms):
    r = CliRunner().invoke(main, ["compare", "--db", measured, "--predict-host-ms", ms])
    assert r.exit_code == 2 and "--predict-host-ms needs --predict-on" in r.stderr


def test_best_config_by_prediction_on_another_kind_of_device(sqlite_url):
    """Linear k=3 ran slower on the CPU than k=2 (12 against 15 tok/s) but drafts the 4 tokens
    in one iteration: on the CPU's own profile the measured speedup picks k=2; predicted on
    the GPU, where no trial ran, the predicted speedup picks k=3 and the table says so."""
    url = _measured(sqlite_url, _trial(LIN3_ITS, 12.0, k=3))
    prefill = 1.3
    ar = prefill + 4 * (1.1 + 0.1)
    lin3 = prefill + (0.4 + 0.25 + 0.25) + 1.4 + 0.1  # draft forwards of 3 + 1, 1, 1 tokens
    assert ar / lin3 > _expected_speedup()  # k=3 predicts faster than k=2

    def linear_row(device, fmt="json"):
        args = ["compare", "--db", url, "--predict-on", device, "--format", fmt]
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 0, r.output
        return (
            r.stdout
            if fmt == "table"
            else next(x for x in json.loads(r.stdout) if x["method"] == "linear")
        )

    on_cpu = linear_row(CPU)
    assert on_cpu["params"].startswith("k=2,") and on_cpu["speedup"] == pytest.approx(1.5)
    on_gpu = linear_row(GPU)
    assert on_gpu["params"].startswith("k=3,") and on_gpu["speedup"] is None
    assert on_gpu["predicted_speedup"] == pytest.approx(ar / lin3)
    table = linear_row(GPU, "table")
    assert "best config by predicted speedup" in table and "k=3" in table
    assert "best config by mean speedup" in linear_row(CPU, "table")


def test_predictions_need_no_measured_baseline_and_keep_top_p_apart(sqlite_url, tmp_path):
    """Linear k=2 also ran at T = 1 with top-p 0.9 and 0.99, where no autoregressive trial ran:
    no measured speedup there, but predictions on the GPU (h_AR = 0: no host time of an
    autoregressive trial), one block or row per top-p in compare and in the report."""
    more = []
    for top_p in (0.9, 0.99):
        cfg, res = _trial(LIN_ITS, 15.0, k=2)
        cfg = type(cfg)(**{**cfg.__dict__, "temperature": 1.0, "top_p": top_p})
        more.append((cfg, res))
    url = _measured(sqlite_url, *more)
    args = ["compare", "--db", url, "--predict-on", GPU]
    r = CliRunner().invoke(main, args + ["--format", "json"])
    assert r.exit_code == 0, r.output
    rows = [(x["method"], x["temperature"], x["top_p"]) for x in json.loads(r.stdout)]
    assert sorted(rows) == sorted(
        [("autoregressive", 0.0, 1.0), ("linear", 0.0, 1.0)]
        + [("linear", 1.0, 0.9), ("linear", 1.0, 0.99)]
    )
    table = CliRunner().invoke(main, args).stdout
    assert "T=1 top_p=0.9 ·" in table and "T=1 top_p=0.99 ·" in table and "T=0 ·" in table
    r = CliRunner().invoke(main, ["report", "--db", url, "-o", str(tmp_path / "r")])
    assert r.exit_code == 0, r.output
    md = (tmp_path / "r" / "report.md").read_text()
    section = md[md.index(f"## Predicted on {GPU}") :]
    assert "| T | top-p |" in section
    assert "| 1 | 0.9 |" in section and "| 1 | 0.99 |" in section


def test_query_ranks_every_config_by_its_prediction(sqlite_url):
    """`orch query --best-by predicted_speedup --predict-on DEVICE`: every config with its
    prediction (the same as compare's), ranked by it; measured speedups stay beside them."""
    url = _measured(sqlite_url, _trial(LIN3_ITS, 12.0, k=3))
    lin3 = 6.1 / (1.3 + (0.4 + 0.25 + 0.25) + 1.4 + 0.1)  # as in the test above

    def ranked(*args):
        base = ["query", "--db", url, "--predict-on", GPU, "--format", "json", "--best-by"]
        r = CliRunner().invoke(main, base + list(args))
        assert r.exit_code == 0, r.output
        rows = json.loads(r.stdout)
        return [(x["params"].split(",")[0], x["speedup"], x["predicted_speedup"]) for x in rows]

    by_prediction = ranked("predicted_speedup")
    assert [k for k, _, _ in by_prediction] == ["k=3", "k=2", "verifier=greedy"]
    assert [p for _, _, p in by_prediction] == pytest.approx([lin3, _expected_speedup(), 1.0])
    assert by_prediction[1][1] == pytest.approx(1.5)  # measured, kept
    assert [k for k, _, _ in ranked("speedup")] == ["k=2", "k=3", "verifier=greedy"]
    faster = ranked("predicted_tpot_s")  # smaller is better
    assert [k for k, _, _ in faster] == ["k=3", "k=2", "verifier=greedy"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--best-by", "predicted_speedup"], "--best-by predicted_speedup needs --predict-on"),
        (["--best-by", "speedup", "--predict-dtype", "bfloat16"], "--predict-dtype needs"),
    ],
)
def test_query_predict_errors_are_one_line(measured, args, message):
    r = CliRunner().invoke(main, ["query", "--db", measured, *args])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], lines


@pytest.mark.parametrize("command", [["compare"], ["query", "--best-by", "speedup"]])
def test_unknown_device_is_one_error_line_before_any_result(measured, command):
    r = CliRunner().invoke(main, [*command, "--db", measured, "--predict-on", "Nope GPU"])
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --predict-on: no profile for device")
    assert r.stdout == ""  # not even the line saying which sweep the results come from


def test_orch_profile_tiny_pair_stores_both_roles(sqlite_url):
    r = CliRunner().invoke(
        main,
        [
            "profile",
            "--target",
            "tiny-llama",
            "--draft",
            "tiny-llama-draft",
            "--sizes",
            "1,3",
            "--contexts",
            "0,8",
            "--repeats",
            "1",
            "--draft-dtype",
            "bf16",
            "--db",
            sqlite_url,
        ],
    )
    assert r.exit_code == 0, r.output
    store = Store(sqlite_url, mode="read")
    rows = load_profiles(store, device_info("cpu")["device_name"])
    assert {(x["model"], x["dtype"]) for x in rows} == {
        ("tiny-llama", "float32"),
        ("tiny-llama-draft", "bfloat16"),
    }
    assert all(len(x["curve"].points) == 4 for x in rows)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--sizes", "1,x"], "--sizes expects comma-separated integers"),
        (["--sizes", "0"], "sizes must be integers >= 1"),
        (["--contexts", ""], "--contexts is empty"),
        (["--dtype", "fp8"], "unknown dtype 'fp8'"),
        (["--target", "no-such-model"], "no-such-model"),
    ],
)
def test_orch_profile_bad_input(tmp_path, args, message):
    url = f"sqlite:///{tmp_path}/p.db"
    base = ["profile", "--target", "tiny-llama", "--draft", "tiny-llama-draft", "--db", url]
    r = CliRunner().invoke(main, base + args)
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0]
    assert not (tmp_path / "p.db").exists()  # nothing written before the input is checked


def test_predict_uses_each_roles_dtype_and_skips_unprofiled():
    """A trial with an fp32 target and a bf16 draft is predicted from those two curves; a
    trial whose draft dtype has no curve is left out; an old trial (no draft_dtype) uses
    dtype for both."""
    import pandas as pd

    from orchestrator.profiles import predict_frame

    curves = {
        ("t", "float32", "eager"): _linear("t", CPU, 1.0, 0.1),
        ("d", "bfloat16", "eager"): _linear("d", CPU, 0.2, 0.05, "bfloat16"),
        ("d", "float32", "eager"): _linear("d", CPU, 2.0, 0.5),
    }
    its = [_iters(LIN_ITS, host=0.1)]
    prompt = [{"prompt_tokens": 4}]
    base = {k: None for k in ("dataset", "prompts", "category", "prompt_tokens", "chat")}
    base.update(target="t", draft="d", temperature=0.0, top_p=1.0, max_new_tokens=4)
    base.update(device="auto", method="linear", per_prompt=prompt, per_iteration=its)
    df = pd.DataFrame(
        [
            {**base, "trial_id": 1, "dtype": "fp32", "draft_dtype": "bf16", "engine": "eager"},
            {**base, "trial_id": 2, "dtype": "fp32", "draft_dtype": "fp16", "engine": "eager"},
            {**base, "trial_id": 3, "dtype": "fp32", "draft_dtype": float("nan")},
        ]
    )
    out = predict_frame(df, curves, CPU).set_index("trial_id")["predicted_speedup"]
    assert set(out.index) == {1, 3}
    prefill, ar = 1.3, 1.3 + 4 * 1.1  # no autoregressive trial: h_AR = 0
    fast_draft = prefill + (0.4 + 0.25) + 1.3 + 0.1 + (0.25 + 0.25) + 1.3 + 0.1
    slow_draft = prefill + (4.0 + 2.5) + 1.3 + 0.1 + (2.5 + 2.5) + 1.3 + 0.1
    assert out[1] == pytest.approx(ar / fast_draft)
    assert out[3] == pytest.approx(ar / slow_draft)


H100 = "NVIDIA H100 80GB HBM3"
H100_PROFILE = str(
    Path(__file__).resolve().parents[2] / "bench/records/gpu_h100_profile.json"
)  # bench/gpu.py on an H100, 2026-11-26


def test_profile_import_stores_a_gpu_run_and_predicts_on_it(sqlite_url):
    """The H100 run's profile file into the database, then the cost model's prediction there
    for trials of the real pair's names on engine fast (the curves' engine)."""
    r = CliRunner().invoke(main, ["profile-import", H100_PROFILE, "--db", sqlite_url])
    assert r.exit_code == 0, r.output
    assert r.output.count(f"on {H100}") == 4
    store = Store(sqlite_url)
    rows = load_profiles(store, H100)
    assert {(x["model"], x["dtype"], x["engine"]) for x in rows} >= {
        ("qwen2.5-coder-1.5b", "bfloat16", "fast"),
        ("qwen2.5-coder-0.5b", "bfloat16", "fast"),
    }
    assert all(x["driver"].startswith("cuda 13.0") and x["cores"] == 132 for x in rows)
    assert all(x["versions"]["torch"] == "2.11.0+cu130" for x in rows)
    _real_pair_sweep(store, "qwen", "fast")
    store.close()
    again = CliRunner().invoke(main, ["profile-import", H100_PROFILE, "--db", sqlite_url])
    assert again.exit_code == 0  # a key's curve is replaced, not doubled
    assert len(load_profiles(Store(sqlite_url), H100)) == len(rows)
    r = CliRunner().invoke(
        main, ["compare", "--db", sqlite_url, "--predict-on", H100, "--format", "json"]
    )
    assert r.exit_code == 0, r.output
    predicted = {x["method"]: x["predicted_speedup"] for x in json.loads(r.stdout)}
    assert predicted["autoregressive"] == pytest.approx(1.0)
    assert 0 < predicted["linear"] < 10


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "No such file"),
        ("{not json", "not JSON"),
        ('{"curves": []}', 'no "device" object'),
        ('{"device": {"device_name": "X"}, "curves": []}', "no curves"),
        ('{"device": {"device_name": "X"}, "curves": [{"model": "m"}]}', "curve 0 is malformed"),
        (
            '{"device": {"device_name": "X"}, "curves": [{"model": "m", "device_name": "Y", '
            '"dtype": "bfloat16", "engine": "fast", "points": [[0, 1, 0.1]]}]}',
            "measured on 'Y', not the file's device 'X'",
        ),
        (
            '{"device": {"device_name": "X"}, "curves": [{"model": "m", "device_name": "X", '
            '"dtype": "bfloat16", "engine": "fast", "points": [[0, 1, -1.0]]}]}',
            "has no points or a bad one",
        ),
    ],
)
def test_profile_import_bad_file_is_one_line_before_the_database(tmp_path, content, message):
    path = tmp_path / "profile.json"
    if content is not None:
        path.write_text(content)
    url = f"sqlite:///{tmp_path}/p.db"
    r = CliRunner().invoke(main, ["profile-import", str(path), "--db", url])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], lines
    assert not (tmp_path / "p.db").exists()


H100_GRAPHS_PROFILE = str(
    Path(__file__).resolve().parents[2] / "bench/records/gpu_h100_graphs_profile.json"
)  # bench/gpu.py --pair-engine graphs on an H100, 2026-11-27


def _real_pair_sweep(store, name: str, engine: str, dtype: str = "auto") -> None:
    """Autoregressive and linear k=2 trials of the real pair's names on `engine`."""
    pair = dict(target="qwen2.5-coder-1.5b", draft="qwen2.5-coder-0.5b", engine=engine, dtype=dtype)
    trials = []
    for method, lists in (("autoregressive", AR_ITS), ("linear", LIN_ITS)):
        cfg = fake_config(method=method, **({"k": 2} if method == "linear" else {}))
        cfg = type(cfg)(**{**cfg.__dict__, **pair})
        res = fake_result(cfg)
        res = type(res)(
            **{
                **res.__dict__,
                "per_prompt": [{"id": "p0", "prompt_tokens": 4, "tokens": [1, 2, 3, 4]}],
                "per_iteration": [_iters(lists)],
            }
        )
        trials.append((cfg, res))
    record_sweep(store, name, trials)


def test_predict_engine_predicts_fast_trials_on_the_graphs_curves(sqlite_url):
    """Trials stored on engine fast, predicted on the H100's `graphs` curves (CUDA graphs of
    the eager kernels, the only engine in that profile): with --predict-engine graphs exactly
    as the same trials stored on engine graphs are; without it the fast trials have no curve
    there and get no prediction. Likewise fp32 trials on its bf16 curves (--predict-dtype)."""
    r = CliRunner().invoke(main, ["profile-import", H100_GRAPHS_PROFILE, "--db", sqlite_url])
    assert r.exit_code == 0, r.output
    store = Store(sqlite_url)
    _real_pair_sweep(store, "on_fast", "fast")
    _real_pair_sweep(store, "on_graphs", "graphs")
    _real_pair_sweep(store, "fp32_fast", "fast", "float32")  # a CPU run's dtype
    store.close()

    def run(sweep, *more):
        args = ["compare", "--sweep", sweep, "--db", sqlite_url, "--predict-on", H100]
        return CliRunner().invoke(main, args + ["--format", "json", *more])

    def predicted(sweep, *more):
        r = run(sweep, *more)
        assert r.exit_code == 0, r.output
        return {x["method"]: x["predicted_speedup"] for x in json.loads(r.stdout)}

    def no_curves(sweep, *more):  # one error line, as nothing can be predicted
        r = run(sweep, *more)
        assert r.exit_code == 2 and "the device has no curves for these trials" in r.stderr

    want = predicted("on_graphs")
    assert want["autoregressive"] == pytest.approx(1.0) and 0 < want["linear"] < 10
    assert predicted("on_fast", "--predict-engine", "graphs") == want
    no_curves("on_fast")
    # fp32 trials: no fp32 curve on the H100; on its bf16 curves with --predict-dtype
    no_curves("fp32_fast", "--predict-engine", "graphs")
    both = ("--predict-engine", "graphs", "--predict-dtype", "bfloat16")
    assert predicted("fp32_fast", *both) == want
    for flag, value in (("--predict-engine", "graphs"), ("--predict-dtype", "bfloat16")):
        r = CliRunner().invoke(main, ["compare", "--db", sqlite_url, flag, value])
        assert r.exit_code == 2 and f"{flag} needs --predict-on" in r.stderr
