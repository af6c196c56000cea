"""`orch compare`, `query` and `report` with --predict-on and --predict-host-ms, against the cost
model computed by hand (tests/orchestrator/profile_helpers.py)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from orchestrator.cli import main
from tests.orchestrator.profile_helpers import (
    CPU,
    GPU,
    LIN3_ITS,
    LIN_ITS,
    _expected_speedup,
    _measured,
    _trial,
)

# by hand, as _expected_speedup: autoregressive 1.3 + 4 x 1.2 against linear k=3's one
# iteration, draft forwards of 3 + 1, 1 and 1 tokens, a 4-node target forward and 0.1 s host
LIN3_SPEEDUP = (1.3 + 4 * (1.1 + 0.1)) / (1.3 + (0.4 + 0.25 + 0.25) + 1.4 + 0.1)


@pytest.fixture
def measured(sqlite_url):
    return _measured(sqlite_url)


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


@pytest.mark.parametrize("value", ["-1", "fast", "nan", "inf"])
@pytest.mark.parametrize(
    "command",
    [["compare", "--predict-on", GPU], ["query", "--best-by", "speedup", "--predict-on", GPU]]
    + [["report"]],
)
def test_predict_host_ms_bad_value(measured, value, command, tmp_path):
    """nan passes click's FloatRange: it predicted 0.00x for every method, exit 0."""
    args = [*command, "--db", measured, "--predict-host-ms", value]
    if command == ["report"]:
        args += ["-o", str(tmp_path / "report")]
    r = CliRunner().invoke(main, args)
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
    assert LIN3_SPEEDUP > _expected_speedup()  # k=3 predicts faster than k=2

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
    assert on_gpu["predicted_speedup"] == pytest.approx(LIN3_SPEEDUP)
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

    def ranked(*args):
        base = ["query", "--db", url, "--predict-on", GPU, "--format", "json", "--best-by"]
        r = CliRunner().invoke(main, base + list(args))
        assert r.exit_code == 0, r.output
        rows = json.loads(r.stdout)
        return [(x["params"].split(",")[0], x["speedup"], x["predicted_speedup"]) for x in rows]

    by_prediction = ranked("predicted_speedup")
    assert [k for k, _, _ in by_prediction] == ["k=3", "k=2", "verifier=greedy"]
    assert [p for _, _, p in by_prediction] == pytest.approx(
        [LIN3_SPEEDUP, _expected_speedup(), 1.0]
    )
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
