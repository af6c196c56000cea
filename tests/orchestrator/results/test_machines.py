"""A shared database of mixed hardware: speedups only against the same machine's baseline,
compare per machine and side by side, where a trial ran as columns (settings.py machine)."""

from __future__ import annotations

import dataclasses
import io
import json

import pandas as pd
import pytest
from click.testing import CliRunner

from orchestrator.cli import main
from orchestrator.results import machine
from orchestrator.store import Store
from tests.orchestrator.orch_helpers import fake_config, fake_result

EPYC, H100, XEON = (
    "AMD EPYC 7763 64-Core Processor",
    "NVIDIA H100 80GB HBM3",
    "Intel(R) Xeon(R) Processor",
)
# (device, device name, host, method, k, repeat, throughput): tok/s per prompt p0 and p1
ROWS = [
    ("cpu", EPYC, "node-a", "autoregressive", None, 0, (10.0, 10.0)),
    ("cpu", EPYC, "node-a", "linear", 2, 0, (15.0, 15.0)),
    ("cuda", H100, "gpu-1", "autoregressive", None, 0, (100.0, 100.0)),
    ("cuda", H100, "gpu-1", "linear", 2, 0, (300.0, 100.0)),
    # the EPYC's linear config's second repeat, run by another driver on another machine,
    # which has no autoregressive trial
    ("cpu", XEON, "node-b", "linear", 2, 1, (40.0, 40.0)),
]


def test_machine_names_the_device_and_the_host_where_the_cpu_model_is_generic():
    assert machine("cuda", H100, "gpu-1") == H100
    assert machine("cpu", EPYC, "node-a") == EPYC
    assert machine("cpu", XEON, "node-b") == f"{XEON} @ node-b"
    assert machine("cpu", "Intel(R) Xeon(R) Processor @ 2.80GHz", "vm") == (
        "Intel(R) Xeon(R) Processor @ 2.80GHz @ vm"  # a clock is not a model number
    )
    assert machine("cpu", "", "vm") == "unrecorded @ vm"


@pytest.fixture
def mixed(sqlite_url):
    store = Store(sqlite_url)
    trials = []
    for device, name, host, method, k, repeat, tps in ROWS:
        cfg = fake_config(method=method, repeat=repeat, **({"k": k} if k else {}))
        cfg = dataclasses.replace(cfg, device=device)
        per_prompt = [
            {"id": f"p{i}", "new_tokens": 8, "iterations": 4, "total_s": 8 / tp, "tokens": [1]}
            for i, tp in enumerate(tps)
        ]
        res = fake_result(cfg, throughput=16 / sum(8 / tp for tp in tps))
        res = dataclasses.replace(
            res,
            per_prompt=per_prompt,
            device_name=name,
            host=host,
            gpu_id="0" if device != "cpu" else None,
        )
        trials.append((cfg, res, host))
    sid = store.submit("mixed", {"name": "mixed"}, [c for c, _, _ in trials], "v").sweep_id
    store.begin_run(sid)
    ids = {c.config_hash: i for i, c, _ in store.runnable(sid)}
    for cfg, res, host in trials:
        store.mark_running(ids[cfg.config_hash], host, res.gpu_id)
        store.record_result(ids[cfg.config_hash], res)
    store.finish_run(sid)
    store.close()
    return sqlite_url


def _run(*args):
    r = CliRunner().invoke(main, list(args))
    assert r.exit_code == 0, r.output
    return r.stdout


def test_no_speedup_crosses_machines(mixed):
    rows = pd.read_csv(io.StringIO(_run("export", "--db", mixed)))
    got = {(r.machine, r.method): r for r in rows.itertuples()}
    assert got[(EPYC, "linear")].speedup == pytest.approx(1.5)
    # pooled 16 tokens over 8/300 + 8/100 s against the H100's own 100 tok/s
    assert got[(H100, "linear")].speedup == pytest.approx(1.5)
    xeon = got[(f"{XEON} @ node-b", "linear")]
    assert (
        pd.isna(xeon.speedup) and xeon.speedup_note == f"no autoregressive trial on {XEON} @ node-b"
    )
    assert {r.host for r in rows.itertuples()} == {"node-a", "gpu-1", "node-b"}
    assert set(rows["device_name"]) == {EPYC, H100, XEON}
    # the H100 linear config: 3x on p0, 1x on p1, so its interval spans them; the EPYC's is tight
    assert got[(EPYC, "linear")].speedup_lo == pytest.approx(1.5)
    assert got[(H100, "linear")].speedup_lo == pytest.approx(1.0)
    assert got[(H100, "linear")].speedup_hi == pytest.approx(3.0)


def test_query_offers_where_a_trial_ran(mixed):
    rows = json.loads(
        _run(
            "query", "--best-by", "speedup", "--columns", "+device_name,host,machine,speedup_lo",
            "--db", mixed, "--format", "json",
        )
    )  # fmt: skip
    linear = {r["machine"]: r for r in rows if r["method"] == "linear"}
    assert linear[H100]["device_name"] == H100 and linear[H100]["host"] == "gpu-1"
    assert linear[H100]["speedup_lo"] == pytest.approx(1.0)
    assert len({r["group"] for r in rows}) == 3  # one group per machine
    table = _run("query", "--best-by", "speedup", "--columns", "+device_name,host", "--db", mixed)
    assert XEON in table and "node-b" in table


def test_compare_lists_each_machine_and_sets_them_side_by_side(mixed):
    rows = json.loads(_run("compare", "--db", mixed, "--format", "json"))
    by = {(r["machine"], r["method"]): r for r in rows}
    assert set(m for m, _ in by) == {EPYC, H100, f"{XEON} @ node-b"}
    assert by[(EPYC, "linear")]["rank"] == 1 and not by[(EPYC, "linear")]["tied"]
    # on the H100 the linear interval (1.0-3.0) overlaps autoregressive's 1.0: a tie
    assert by[(H100, "linear")]["rank"] == 1 and by[(H100, "autoregressive")]["tied"]
    assert by[(f"{XEON} @ node-b", "linear")]["speedup"] is None
    text = _run("compare", "--db", mixed)
    assert f"no autoregressive trial on {XEON} @ node-b: no speedups" in text
    assert "fastest: linear, tied with autoregressive (95% CIs overlap)" in text
    assert "fastest: linear (no other 95% CI overlaps its)" in text
    side = text[text.index("side by side:") :].splitlines()
    head = side[1]
    assert EPYC in head and H100 in head and "Xeon" in head
    linear = next(x for x in side if x.startswith("linear"))
    assert "1.50x (1.50-1.50) #1" in linear and "1.50x (1.00-3.00) #1" in linear
    ar = next(x for x in side if x.startswith("autoregressive"))
    assert "1.00x (1.00-1.00) #1 tie" in ar and "1.00x (1.00-1.00) #2" in ar
    assert all(len(x) <= 100 for x in text.splitlines()[1:])


def test_the_report_keeps_machines_apart(mixed, tmp_path):
    _run("report", "mixed", "--db", mixed, "-o", str(tmp_path / "r"))
    text = (tmp_path / "r" / "report.md").read_text()
    assert f"no autoregressive trial on {XEON} @ node-b: 1 config" in text
    side = text[text.index("### Machines side by side") :]
    assert EPYC in side.splitlines()[2] and H100 in side.splitlines()[2]
    assert r"| linear | 1.500 (1.500-1.500) \#1 | 1.500 (1.000-3.000) \#1 |" in side
    assert r"| autoregressive | 1.000 (1.000-1.000) \#2 | 1.000 (1.000-1.000) \#=1 |" in side


def test_a_revision_or_placement_is_a_setting_of_the_baseline(sqlite_url):
    """A trial of another target revision (engine/hub.py) or placement has no baseline in the
    autoregressive trial of the first, and the frame keys a placement as `k=v` text."""
    from orchestrator.results import load_frame

    store = Store(sqlite_url)
    base = fake_config(method="autoregressive")
    trials = [
        base,
        dataclasses.replace(fake_config(k=2), target_revision="a" * 40),
        dataclasses.replace(fake_config(k=3), placement={"gpus_per_trial": 2}),
        fake_config(k=4),
    ]
    sid = store.submit("revs", {"name": "revs"}, trials, "v").sweep_id
    store.begin_run(sid)
    for i, cfg, _ in store.runnable(sid):
        store.mark_running(i, "h", None)
        store.record_result(
            i, fake_result(cfg, throughput=20.0 if cfg.method == "linear" else 10.0)
        )
    store.finish_run(sid)
    df = load_frame(store, "revs").set_index("param.k")
    store.close()
    assert df.loc[4.0, "speedup"] == pytest.approx(2.0)
    for k in (2.0, 3.0):
        assert pd.isna(df.loc[k, "speedup"])
        assert df.loc[k, "speedup_note"] == "no autoregressive trial with these settings"
    assert df.loc[3.0, "placement"] == "gpus_per_trial=2"
