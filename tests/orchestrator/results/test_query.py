"""query / compare / export / plot over a database filled with known results (no models)."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest
from click.testing import CliRunner

from orchestrator.cli import main
from orchestrator.store import Store
from tests.orchestrator.orch_helpers import fake_config, fake_result, record_sweep

LL, NX = ("tiny-llama", "tiny-llama-draft"), ("tiny-neox", "tiny-neox-draft")
# (pair, method, params, max_new_tokens, [throughput per repeat], acceptance)
ROWS = [
    (LL, "autoregressive", {}, 8, [90.0, 110.0], 0.0),
    (LL, "linear", {"k": 2}, 8, [150.0, 170.0], 0.7),
    (LL, "linear", {"k": 4}, 8, [200.0, 200.0], 0.6),
    (LL, "fixed_tree", {"depth": 2, "branch": 2}, 8, [120.0, 120.0], 0.4),
    (LL, "fixed_tree", {"depth": 3, "branch": 2}, 8, [130.0, 130.0], 0.3),
    (NX, "autoregressive", {}, 8, [50.0, 50.0], 0.0),
    (NX, "linear", {"k": 2}, 8, [75.0, 75.0], 0.5),
    (NX, "linear", {"k": 4}, 8, [60.0, 60.0], 0.4),
    (LL, "linear", {"k": 2}, 16, [300.0, 300.0], 0.7),  # no baseline at 16 tokens
]


@pytest.fixture
def filled(sqlite_url):
    store = Store(sqlite_url)
    trials = []
    for pair, method, params, mnt, tps, acc in ROWS:
        for r, tp in enumerate(tps):
            cfg = fake_config(
                method=method, target=pair[0], draft=pair[1], repeat=r, max_new_tokens=mnt, **params
            )
            trials.append(
                (cfg, fake_result(cfg, throughput=tp, acceptance_rate=acc, ttft_s=1000.0 / tp))
            )
    sid = store.submit("rep", {"name": "rep"}, [c for c, _ in trials], "v").sweep_id
    store.begin_run(sid)
    ids = {c.config_hash: i for i, c, _ in store.runnable(sid)}
    for cfg, res in trials[:-1]:  # the last one stays pending: not reported
        store.mark_running(ids[cfg.config_hash], "h", None)
        store.record_result(ids[cfg.config_hash], res)
    store.finish_run(sid)
    store.close()
    return sqlite_url


def _run(*args):
    r = CliRunner().invoke(main, list(args))
    assert r.exit_code == 0, r.output
    return r.stdout


def test_query_best_by_groups_repeats_and_filters(filled):
    rows = json.loads(_run("query", "--best-by", "throughput", "--db", filled, "--format", "json"))
    assert rows[0]["method"] == "linear" and rows[0]["params"] == "k=2,verifier=greedy"
    assert rows[0]["max_new_tokens"] == 16 and rows[0]["repeats"] == 1
    assert rows[1]["throughput"] == 200.0 and rows[1]["repeats"] == 2
    assert rows[1]["speedup"] == pytest.approx(2.0)
    ll_ar = next(r for r in rows if r["method"] == "autoregressive" and r["target"] == LL[0])
    assert ll_ar["throughput"] == 100.0 and ll_ar["throughput_std"] == pytest.approx(14.1421, 1e-4)
    rows = json.loads(
        _run(
            "query",
            "--best-by",
            "speedup",
            "--where",
            "method=linear",
            "--where",
            "k>=3",
            "--db",
            filled,
            "--format",
            "json",
        )
    )
    assert [(r["target"], r["speedup"]) for r in rows] == [(LL[0], 2.0), (NX[0], 1.2)]
    fastest = json.loads(
        _run("query", "--best-by", "ttft_s", "--top", "1", "--db", filled, "--format", "json")
    )
    assert fastest[0]["ttft_s"] == pytest.approx(1000.0 / 300.0)  # smaller is better
    csv = _run("query", "--best-by", "acceptance_rate", "--db", filled, "--format", "csv")
    assert pd.read_csv(io.StringIO(csv))["acceptance_rate"].iloc[0] == 0.7
    assert "linear" in _run("query", "--best-by", "throughput", "--db", filled)


def test_compare_speedup_against_autoregressive(filled):
    rows = json.loads(_run("compare", "--db", filled, "--format", "json"))
    alone = [r for r in rows if r["max_new_tokens"] == 16]  # no baseline at 16 tokens
    assert [(r["method"], r["speedup"], r["rank"]) for r in alone] == [("linear", None, 1.0)]
    assert alone[0]["speedup_note"] == "no autoregressive trial with these settings"
    rows = [r for r in rows if r["max_new_tokens"] == 8]
    got = {(r["method"], r["pair"]): (r["speedup"], r["params"]) for r in rows}
    assert got[("autoregressive", "tiny-llama/tiny-llama-draft")][0] == 1.0
    assert got[("linear", "tiny-llama/tiny-llama-draft")] == (2.0, "k=4,verifier=greedy")
    assert got[("linear", "tiny-neox/tiny-neox-draft")] == (1.5, "k=2,verifier=greedy")
    assert got[("fixed_tree", "tiny-llama/tiny-llama-draft")][0] == pytest.approx(1.3)
    assert ("fixed_tree", "tiny-neox/tiny-neox-draft") not in got
    assert all(r["max_new_tokens"] == 8 for r in rows)  # 16 tokens has no baseline
    table = _run("compare", "--db", filled)
    assert "2.00x" in table and "1.50x" in table and "tiny-neox/tiny-neox-draft" in table


def test_export_formats(filled, tmp_path):
    rows = json.loads(_run("export", "--format", "json", "--db", filled))
    assert len(rows) == 17
    r = rows[0]
    for key in (
        "config_hash",
        "method",
        "target",
        "draft",
        "params",
        "max_new_tokens",
        "repeat",
        "seed",
        "throughput",
        "acceptance_rate",
        "worker_host",
        "speedup",
    ):
        assert key in r
    csv = pd.read_csv(io.StringIO(_run("export", "--db", filled, "--where", "method=linear")))
    assert len(csv) == 9 and set(csv["params.k"]) == {2, 4}  # MLflow-style names
    out = tmp_path / "x.parquet"
    _run("export", "--format", "parquet", "-o", str(out), "--details", "--db", filled)
    pq = pd.read_parquet(out)
    assert len(pq) == 17 and json.loads(pq["per_prompt"].iloc[0])[0]["tokens"] == [1, 2, 3]
    detailed = json.loads(_run("export", "--format", "json", "--details", "--db", filled))
    assert detailed[0]["per_iteration"] == [{"accepted": [1, 2], "tree_size": [3, 3]}]


def test_plots(filled, tmp_path):
    out = _run("plot", "-o", str(tmp_path / "p"), "--db", filled).split()
    names = sorted(p.rsplit("/", 1)[-1] for p in out)
    assert names == [
        "acceptance_fixed_tree_depth.png",
        "speedup_by_method.png",
        "speedup_fixed_tree_depth.png",
        "speedup_linear_k.png",
        "tokens_per_iteration_fixed_tree_depth.png",
    ]
    for p in out:
        with open(p, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_bad_where(filled):
    r = CliRunner().invoke(
        main, ["query", "--best-by", "throughput", "--where", "colour=red", "--db", filled]
    )
    assert r.exit_code == 2 and "unknown --where column 'colour'" in r.stderr
    r = CliRunner().invoke(
        main, ["query", "--best-by", "throughput", "--where", "k~2", "--db", filled]
    )
    assert r.exit_code == 2 and "--where expects" in r.stderr


def test_plot_with_nothing_to_plot_makes_no_folder(filled, tmp_path):
    """A filter that leaves no trial: one error line, and no empty plot folder left."""
    out = tmp_path / "plots"
    args = ["plot", "--where", "method=nope", "-o", str(out), "--db", filled]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2 and r.stderr.startswith("error: nothing to plot"), r.output
    assert r.stderr.count("\n") == 1 and not out.exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["export", "--where", "colour=red"], "unknown --where column 'colour'"),
        (["export", "--format", "json", "--where", "k>=x"], ">= needs a number"),
        (["plot", "--where", "colour=red"], "unknown --where column 'colour'"),
        (["compare", "--format", "csv", "--where", "k~2"], "--where expects"),
        (["query", "--best-by", "speedup", "--format", "json", "--where", "colour=red"], "colour"),
        (["query", "--best-by", "speedup", "--format", "csv", "--columns", "nope"], "'nope'"),
    ],
)
def test_bad_where_or_columns_is_the_only_stderr_line(filled, tmp_path, args, message):
    """The line naming the sweep read goes to stderr for export, plot and json/csv: it came
    before the error, two lines for one bad filter; it is said once the answer is ready."""
    if args[0] == "plot":
        args = [*args, "-o", str(tmp_path / "plots")]
    r = CliRunner().invoke(main, [*args, "--db", filled])
    assert r.exit_code == 2, r.output
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: "), r.stderr
    assert message in r.stderr and r.stdout == ""
    assert not (tmp_path / "plots").exists()


def test_speedups_are_against_autoregressive_decoding_on_the_same_engine(sqlite_url):
    """A sweep over engines (e.g. graphs and graphs+lean on a GPU): each trial's speedup is
    over the autoregressive trial on its own engine path, and compare shows each engine."""
    import dataclasses

    store = Store(sqlite_url)
    rows = [("eager", "autoregressive", 10.0), ("eager", "linear", 15.0)]
    rows += [("fast", "autoregressive", 40.0), ("fast", "linear", 80.0)]
    trials = []
    for engine, method, tp in rows:
        cfg = dataclasses.replace(fake_config(method=method), engine=engine)
        trials.append((cfg, fake_result(cfg, throughput=tp)))
    record_sweep(store, "engines", trials)
    store.close()
    got = json.loads(_run("compare", "--db", sqlite_url, "--format", "json"))
    speedups = {(r["method"], r["engine"]): r["speedup"] for r in got}
    assert speedups == {
        ("autoregressive", "eager"): 1.0,
        ("autoregressive", "fast"): 1.0,
        ("linear", "eager"): 1.5,
        ("linear", "fast"): 2.0,
    }
