"""`orch report` (orchestrator/results/paper/): one sweep of the tiny pair (autoregressive, two
verifiers at two temperatures > 0, a DynaTree depth x branch x threshold grid, DDTree budgets)
stored with synthetic results into SQLite and into Postgres gives byte-identical report.md and
report.html with the sections its grid calls for and valid PNG figures; bad input is one error
line, exit 2, nothing written."""

from __future__ import annotations

import dataclasses
import random

import pytest
from click.testing import CliRunner

from engine.certify.teacher_forced import sampling_certificate
from engine.config import ConfigError
from engine.cost_model import CurvePoint, ForwardCurve
from engine.methods import resolve_method
from orchestrator.cli import main
from orchestrator.records import TrialFailure
from orchestrator.results.paper.configs import SETTING_COLS, certificate_cell
from orchestrator.results.profiles import save_curves
from orchestrator.results.settings import DRAFT_SETTINGS, SETTINGS
from orchestrator.spec import load_sweep
from orchestrator.spec.scale import provenance
from orchestrator.store import Store
from tests.orchestrator.orch_helpers import fake_result

SWEEP = """\
# A test sweep for orch report (DynaTree Sec. 4.6, Fig. 4; Delayed Tree Expansion Table 2).
# trials: 2 temperatures x (1 + 4 + 8 + 2) configs x 2 repeats
name: report-tiny
description: the tiny pair, every section of the report
pairs: [{target: tiny-llama, draft: tiny-llama-draft}]
dataset: {name: spec_bench, prompts: 2, prompt_tokens: 32}
sampling: {temperature: [0.6, 1.0]}
max_new_tokens: 16
repeats: 2
scale: {prompts: 1, max_new_tokens: 8}
methods:
  - name: autoregressive
  - name: iid
    params: {L: 2}
    grid: {verifier: [spectr, traversal], K: [1, 2]}
  - name: dynatree
    params: {dynamic_breadth: false, dynamic_depth: false, history_adaptation: false}
    grid: {depth: [2, 3], branch: [1, 2], threshold: [0.01, 0.1]}
  - name: ddtree
    params: {L: 4}
    grid: {B: [8, 16]}
"""
GPU = "NVIDIA Test GPU"
INFO = {"driver": "", "torch": "2.x", "transformers": "5.x", "triton": "", "cores": 2, "host": "h"}
PNG = b"\x89PNG\r\n\x1a\n"


def _iterations(rnd: random.Random, method: str, n: int) -> dict[str, list]:
    """Per-iteration lists of one generation, as GenerationStats.to_dict stores them."""
    its: dict[str, list] = {}
    for _ in range(n):
        size = 1 if method == "autoregressive" else rnd.randint(3, 9)
        accepted = min(rnd.randint(0, 3), size - 1)
        tried = 0 if size == 1 else min(accepted + rnd.randint(0, 1), size - 1)
        row = {
            "tree_size": size,
            "accepted": accepted,
            "emitted": accepted + 1,
            "draft_s": 0.002,
            "target_s": 0.004,
            "verify_s": 0.001,
            "bookkeeping_s": 0.0005,
            "draft_forward_s": 0.001,
            "target_forward_s": 0.003,
            "draft_forwards": 0 if size == 1 else 2,
            "draft_tokens": 0 if size == 1 else size,
            "top_match": min(accepted + rnd.randint(0, 2), size - 1),
            "tried": tried,
        }
        for k, v in row.items():
            its.setdefault(k, []).append(v)
    return its


def _result(cfg):
    """A deterministic synthetic result of `cfg`: lists, metrics and certificate agree."""
    rnd = random.Random(cfg.config_hash)
    lists = [_iterations(rnd, cfg.method, 5) for _ in range(cfg.prompts)]
    emitted = sum(sum(x["emitted"]) for x in lists)
    iterations = sum(len(x["emitted"]) for x in lists)
    method = resolve_method(cfg.method, dict(cfg.params), cfg.temperature, cfg.draft_temperature)
    cert = sampling_certificate(method, cfg.temperature, cfg.draft_temperature)
    per_prompt = [
        {"id": f"p{i}", "prompt_tokens": 32, "tokens": [1] * sum(x["emitted"]), "certificate": cert}
        for i, x in enumerate(lists)
    ]
    tp = 100.0 if cfg.method == "autoregressive" else 100.0 * rnd.uniform(0.5, 1.5)
    res = fake_result(cfg, throughput=round(tp, 6), tokens_per_iteration=emitted / iterations)
    metrics = {
        **res.metrics,
        "new_tokens": emitted,
        "iterations": iterations,
        "prompts": cfg.prompts,
    }
    return dataclasses.replace(
        res,
        metrics=metrics,
        per_prompt=per_prompt,
        per_iteration=lists,
        device_name="Test CPU 9000",
    )


def store_sweep(url: str, path) -> str:
    """The scaled sweep of `path` stored as a driver would, one trial failed; returns its name."""
    sweep, trials = load_sweep(path, scaled=True)
    store = Store(url)
    spec = {**sweep.to_dict(), "source": provenance(path, scaled=True)}
    sid = store.submit(sweep.name, spec, trials, "v").sweep_id
    store.begin_run(sid)
    for tid, cfg, _ in store.runnable(sid):
        store.mark_running(tid, "worker-1", None)
        if cfg.method == "ddtree" and cfg.params["B"] == 16 and cfg.repeat == 1:
            store.record_failure(
                tid, TrialFailure(cfg.config_hash, "OOM\nout of memory", "worker-1", None, 0.0, 1.0)
            )
        else:
            store.record_result(tid, _result(cfg))
    store.finish_run(sid)
    curves = [
        ForwardCurve(
            m,
            GPU,
            "bfloat16",
            "eager",
            tuple(CurvePoint(c, n, a + b * n) for c in (16, 64) for n in (1, 4, 16)),
        )
        for m, a, b in (("tiny-llama", 1e-3, 1e-5), ("tiny-llama-draft", 3e-4, 1e-5))
    ]
    save_curves(store, [(c, INFO) for c in curves])
    store.close()
    return sweep.name


@pytest.fixture
def sweep_file(tmp_path):
    path = tmp_path / "report_tiny.yaml"
    path.write_text(SWEEP)
    return path


def _report(url: str, out) -> None:
    r = CliRunner().invoke(main, ["report", "--db", url, "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "wrote" in r.stdout


@pytest.mark.postgres
def test_report_is_the_same_from_sqlite_and_postgres(tmp_path, sweep_file, sqlite_url, pg_url):
    names = {store_sweep(url, sweep_file) for url in (sqlite_url, pg_url)}
    assert names == {"report-tiny-scaled"}
    _report(sqlite_url, tmp_path / "a")
    _report(pg_url, tmp_path / "b")
    for f in ("report.md", "report.html"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    md = (tmp_path / "a" / "report.md").read_text()
    for text in (
        "# Sweep report-tiny-scaled",
        "the tiny pair, every section of the report",
        "DynaTree Sec. 4.6, Fig. 4; Delayed Tree Expansion Table 2",  # the file's comment
        "reduced by the file's scale: block (max\\_new\\_tokens 8, prompts 1)",
        "## Best config per method",
        "## All configs",
        "dynatree\\_acceptance\\_rate",
        "ddtree\\_mean\\_acceptance\\_length",
        "claimed: traversal on iid trees, distribution-tested",
        "Test CPU 9000",
        "exact: sampled from the target",  # autoregressive: no tree, no verifier
        "## Verifiers",
        "iid · traversal",
        "## DynaTree: depth x branch",
        "## Against temperature",
        "## Against node budget",
        "## DDTree acceptance lengths",
        "## Predicted on NVIDIA Test GPU",
        "## Failed trials",
        "out of memory",  # the error's last line
    ):
        assert text in md, text
    imgs = sorted(p.name for p in (tmp_path / "a" / "img").iterdir())
    assert any(n.startswith("dynatree_speedup_") for n in imgs)
    assert any(n.startswith("acceptance_by_depth_") for n in imgs)
    for n in imgs:
        assert (tmp_path / "a" / "img" / n).read_bytes().startswith(PNG)
        assert f"img/{n}" in md
        assert f'src="img/{n}"' in (tmp_path / "a" / "report.html").read_text()


def test_report_predicts_with_the_given_host_time(tmp_path, sweep_file, sqlite_url):
    """`orch report --predict-host-ms`: the prediction section says so and shows what `orch
    compare --predict-on` gives with the same option, method by method."""
    import json

    store_sweep(sqlite_url, sweep_file)
    sections = {}
    for ms in ("0", "50"):
        out = tmp_path / f"r{ms}"
        args = ["report", "--db", sqlite_url, "-o", str(out), "--predict-host-ms", ms]
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 0, r.output
        md = (out / "report.md").read_text()
        section = md[md.index(f"## Predicted on {GPU}") :].split("\n## ")[0]
        assert f"with {ms} ms outside the forwards per iteration" in section
        args = ["compare", "--db", sqlite_url, "--predict-on", GPU, "--format", "json"]
        r = CliRunner().invoke(main, args + ["--predict-host-ms", ms])
        assert r.exit_code == 0, r.output
        rows = [x for x in json.loads(r.stdout) if x["predicted_speedup"] is not None]
        assert len({x["method"] for x in rows}) >= 3
        for x in rows:
            assert f"| {x['method']} |" in section
            assert f"| {x['predicted_speedup']:.3f} |" in section, (ms, x["method"])
        sections[ms] = section
    assert sections["0"] != sections["50"]


def test_report_errors_are_one_line_and_write_nothing(tmp_path, sweep_file, sqlite_url):
    store_sweep(sqlite_url, sweep_file)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    cases = [
        (["report", "nope", "-o", str(tmp_path / "r1")], "no sweep named 'nope'"),
        (["report", "-o", str(blocker / "sub")], "cannot write the report to"),
        (["report", "-o", str(blocker)], "it is not a folder"),
    ]
    for args, message in cases:
        r = CliRunner().invoke(main, [*args, "--db", sqlite_url])
        assert r.exit_code == 2, r.output
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "orch.db", "report_tiny.yaml"]


def test_empty_sweep_is_one_error_line(tmp_path, sweep_file, sqlite_url):
    sweep, trials = load_sweep(sweep_file)
    store = Store(sqlite_url)
    store.submit(sweep.name, sweep.to_dict(), trials[:2], "v")
    store.close()
    r = CliRunner().invoke(main, ["report", "--db", sqlite_url, "-o", str(tmp_path / "r")])
    assert r.exit_code == 2 and r.stderr.startswith("error: no finished trials of sweep")
    assert not (tmp_path / "r").exists()


def test_certificate_cell_greedy_and_claims():
    ok = {"check": "greedy_teacher_forced", "lossless": True, "checked": 4, "first_mismatch": None}
    bad = {**ok, "lossless": False, "first_mismatch": 3, "mismatches": 1, "max_margin": 2.5}

    def trial(*certs):
        pp = [{"id": f"p{i}", "certificate": c} for i, c in enumerate(certs)]
        return {"method": "iid", "per_prompt": pp, "ar_equal": "-"}

    assert certificate_cell([trial(ok, ok), trial(ok, ok)]) == (
        "lossless: greedy check, 4/4 prompts"
    )
    assert certificate_cell([trial(ok, ok), trial(ok, bad)]).startswith(
        "MISMATCH: 1/4 prompts (first: prompt p1"
    )
    assert certificate_cell([trial(ok, ok), trial(ok, None)]) == "not certified"
    claim = {
        "check": "sampling_verifier_claim",
        "verifier": "nss",
        "tree_sampling": "iid",
        "verifier_declares_lossless": False,
    }
    assert certificate_cell([trial(claim)]) == "NOT lossless: nss on iid trees"


def test_the_report_settings_are_the_baselines_and_the_drafts_own():
    """A report config's settings: the baseline's SETTINGS (target and draft as their pair)
    and the draft's own sampling and dtype (results/settings.py)."""
    baseline = [c for c in SETTINGS if c not in ("target", "draft")]
    assert sorted(SETTING_COLS) == sorted(["pair", *baseline, *DRAFT_SETTINGS])


def test_a_shape_budget_reads_int_parameters_a_frame_holds_as_floats():
    """SpecInfer's budget is the node count of its shape; in a sweep where other methods lack
    its `depth`, the frame's column holds 4.0, and the report must still count the nodes
    (dyspec-scaled's and cross-model-scaled's reports raised on it)."""
    from orchestrator.results.paper.budget import budget_of

    assert budget_of("specinfer", {"k": 2, "depth": 4.0}) == budget_of(
        "specinfer", {"k": 2, "depth": 4}
    )
    with pytest.raises(ConfigError):
        budget_of("specinfer", {"k": 2, "depth": 4.5})
