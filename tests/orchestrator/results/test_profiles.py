"""Hardware profiles in the database (SQLite and Postgres), `orch profile` on tiny models, and
`orch compare --predict-on` against the cost model computed by hand."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select

from db.models import Profile
from engine.curves import device_info
from orchestrator.cli import main
from orchestrator.results.profiles import device_curves, load_profiles, save_curves
from orchestrator.store import Store
from tests.orchestrator.orch_helpers import REPO, fake_config, fake_result, record_sweep
from tests.orchestrator.profile_helpers import (
    AR_ITS,
    CPU,
    GPU,
    INFO,
    LIN_ITS,
    _expected_speedup,
    _iters,
    _linear,
    _measured,
)


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


@pytest.fixture
def measured(sqlite_url):
    return _measured(sqlite_url)


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


@pytest.mark.parametrize(
    "placement, device, measured_shown",
    [
        (("0", GPU), GPU, True),
        (("0", "NVIDIA Other GPU"), GPU, False),  # another GPU's speedups are not GPU's
        (("0", ""), GPU, True),  # no device name stored (before migration 0007): its kind
        ((None, CPU), GPU, False),
        ((None, CPU), CPU, True),
        ((None, "Another CPU"), CPU, False),
    ],
)
def test_compare_shows_measured_only_for_trials_on_that_device(
    sqlite_url, placement, device, measured_shown
):
    db = _measured(sqlite_url, placement=placement)
    r = CliRunner().invoke(
        main, ["compare", "--db", db, "--predict-on", device, "--format", "json"]
    )
    assert r.exit_code == 0, r.output
    linear = {x["method"]: x for x in json.loads(r.stdout)}["linear"]
    assert linear["predicted_speedup"] == pytest.approx(_expected_speedup())
    if measured_shown:
        assert linear["speedup"] == pytest.approx(1.5)
    else:
        assert linear["speedup"] is None


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
        # a context past the model's positions was a traceback (a 25 GB allocation) after
        # the models loaded
        (["--contexts", "99999999"], "tiny-llama has 4096 (max_position_embeddings)"),
        (["--contexts", "4000", "--sizes", "96"], "need 4097 positions"),
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

    from orchestrator.results.profiles import predict_frame

    curves = {
        ("t", "float32", "eager"): _linear("t", CPU, 1.0, 0.1),
        ("d", "bfloat16", "eager"): _linear("d", CPU, 0.2, 0.05, "bfloat16"),
        ("d", "float32", "eager"): _linear("d", CPU, 2.0, 0.5),
    }
    its = [_iters(LIN_ITS, host=0.1)]
    prompt = [{"prompt_tokens": 4}]
    base = {k: None for k in ("dataset", "prompts", "category", "prompt_tokens", "chat")}
    base.update(target_revision=None, draft_revision=None, placement=None)
    base.update(target="t", draft="d", temperature=0.0, top_p=1.0, max_new_tokens=4)
    base.update(device="auto", machine=CPU, method="linear", per_prompt=prompt, per_iteration=its)
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
    REPO / "bench/records/gpu_h100_profile.json"
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
    REPO / "bench/records/gpu_h100_graphs_profile.json"
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
