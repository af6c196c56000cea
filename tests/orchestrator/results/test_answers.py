"""Issue 20, part A: answers a researcher can act on (Spec-Bench tasks, per-group query,
winner naming in compare, most recent sweep by default, params.* export columns, load())."""

from __future__ import annotations

import pytest
import yaml

from engine.datasets import DatasetError, default_category, load_prompts
from orchestrator.records import TrialConfig
from orchestrator.spec.expand import expand
from orchestrator.spec.parse import parse_sweep

TASKS = ["mt_bench", "translation", "summarization", "qa", "math_reasoning", "rag"]

# ---------------------------------------------------------------- Spec-Bench tasks


def test_spec_bench_all_is_stratified_over_the_six_tasks():
    picked = load_prompts("spec_bench", n=12, category="all")
    assert [p.task for p in picked] == TASKS * 2
    # within mt_bench, round-robin over its 8 MT-Bench sub-categories
    assert [p.category for p in picked if p.task == "mt_bench"] == ["writing", "roleplay"]
    assert load_prompts("spec_bench", n=30, category="all")[:12] == picked  # prefix
    assert len(load_prompts("spec_bench", category="all")) == 480


@pytest.mark.parametrize(
    "name, task",
    [
        ("mt_bench", "mt_bench"),
        ("Multi-turn conversation", "mt_bench"),
        ("translation", "translation"),
        ("Summarization", "summarization"),
        ("question answering", "qa"),
        ("Math Reasoning", "math_reasoning"),
        ("Retrieval-augmented generation", "rag"),
    ],
)
def test_spec_bench_tasks_by_name(name, task):
    got = load_prompts("spec_bench", category=name)
    assert len(got) == 80 and {p.task for p in got} == {task}


def test_old_selections_are_unchanged():
    """Stored trials (category None, or an MT-Bench sub-category) keep their prompts."""
    legacy = load_prompts("spec_bench", n=13)
    assert len({p.category for p in legacy}) == 13
    assert [p.category for p in legacy[:3]] == ["writing", "roleplay", "reasoning"]
    assert [p.id for p in load_prompts("spec_bench", n=3, category="math")] == ["111", "112", "113"]
    assert load_prompts("pg19", n=10) == load_prompts("pg19", n=10, category="all")


def test_unknown_category_names_tasks_and_categories():
    with pytest.raises(DatasetError, match="tasks: mt_bench, translation, .*categories: writing"):
        load_prompts("spec_bench", category="poetry")


def _cfg(text: str) -> list[TrialConfig]:
    return expand(parse_sweep(yaml.safe_load(text)), local_models=True)


SWEEP = """\
name: t
pairs: [{target: tiny-llama, draft: tiny-llama-draft}]
dataset: {name: %s, prompts: 2%s}
max_new_tokens: 4
methods: [{name: autoregressive}]
"""


def test_sweep_default_is_the_six_tasks_and_hashes_differ_from_stored_trials():
    (new,) = _cfg(SWEEP % ("spec_bench", ""))
    assert new.category == "all" == default_category("spec_bench")
    stored = TrialConfig(**{**new.to_dict(), "category": None})  # a trial made before
    assert new.config_hash != stored.config_hash
    # other datasets keep category None, so their sweeps' hashes do not move
    (gsm,) = _cfg(SWEEP % ("gsm8k", ""))
    assert gsm.category is None
    (sub,) = _cfg(SWEEP % ("spec_bench", ", category: coding"))
    assert sub.category == "coding"


# ---------------------------------------------------------------- reports over two sweeps

LL, NX = ("tiny-llama", "tiny-llama-draft"), ("tiny-neox", "tiny-neox-draft")
# per prompt: (id, category, new_tokens, total_s); p0 is MT-Bench writing, p1 translation
AR_PROMPTS = [("p0", "writing", 10, 0.1), ("p1", "translation", 10, 0.1)]  # 100 tok/s each
# (pair, method, params, trial throughput, acceptance, per-prompt seconds or None: AR's)
NEW = [
    (LL, "autoregressive", {}, 100.0, 0.0, None),
    (LL, "linear", {"k": 2}, 120.0, 0.8, (0.08, 0.08)),  # 1.25x on both prompts
    (LL, "linear", {"k": 4}, 150.0, 0.6, (0.05, 0.08)),  # 2.0x and 1.25x: the winner
    (NX, "autoregressive", {}, 300.0, 0.0, None),  # the fastest row of all
    (NX, "linear", {"k": 2}, 200.0, 0.5, (0.15, 0.15)),
]


def _result(cfg, tp, acc, seconds):
    import dataclasses

    from tests.orchestrator.orch_helpers import fake_result

    res = fake_result(cfg, throughput=tp, acceptance_rate=acc, tokens_per_iteration=1 + 2 * acc)
    secs = seconds or [s for *_, s in AR_PROMPTS]
    per_prompt = [
        {"id": i, "category": c, "new_tokens": n, "total_s": s, "tokens": [1] * n}
        for (i, c, n, _), s in zip(AR_PROMPTS, secs)
    ]
    return dataclasses.replace(res, per_prompt=per_prompt)


def _submit(store, name, rows):
    from tests.orchestrator.orch_helpers import fake_config, record_sweep

    trials = []
    for pair, method, params, tp, acc, secs in rows:
        cfg = fake_config(method=method, target=pair[0], draft=pair[1], **params)
        cfg = TrialConfig(**{**cfg.to_dict(), "category": "all"})
        trials.append((cfg, _result(cfg, tp, acc, secs)))
    record_sweep(store, name, trials)


@pytest.fixture
def two_sweeps(sqlite_url):
    from orchestrator.store import Store

    store = Store(sqlite_url)
    _submit(store, "old", [(LL, "linear", {"k": 9}, 999.0, 0.9, (0.01, 0.01))])
    _submit(store, "new", NEW)
    store.close()
    return sqlite_url


def _orch(*args, ok=True):
    from click.testing import CliRunner

    from orchestrator.cli import main

    r = CliRunner().invoke(main, list(args))
    if ok:
        assert r.exit_code == 0, r.output
    return r


def test_query_ranks_within_each_group_and_marks_the_baseline(two_sweeps):
    import json

    rows = json.loads(
        _orch("query", "--best-by", "throughput", "--db", two_sweeps, "--format", "json").stdout
    )
    firsts = [(r["pair"], r["method"], r["baseline"]) for r in rows if r["rank"] == 1]
    assert firsts == [("/".join(LL), "linear", False), ("/".join(NX), "autoregressive", True)]
    assert [r["params"] for r in rows if r["pair"] == "/".join(LL)][:2] == [
        "k=4,verifier=greedy",
        "k=2,verifier=greedy",
    ]
    glob = json.loads(
        _orch(
            "query", "--best-by", "throughput", "--global", "--db", two_sweeps, "--format", "json"
        ).stdout
    )
    assert [r["rank"] for r in glob] == [1, 2, 3, 4, 5] and glob[0]["throughput"] == 300.0
    table = _orch("query", "--best-by", "throughput", "--db", two_sweeps).stdout.splitlines()
    assert table[0].startswith("sweep 'new' (the most recent of 2; --sweep NAME")
    assert all(len(line) <= 100 for line in table[1:])
    assert sum(line.startswith("tiny-") and " · spec_bench " in line for line in table) == 2
    assert any(line.split()[:2] == ["1", "autoregressive*"] for line in table)
    assert "tau = tokens_per_iteration" in "\n".join(table)


def test_query_columns_choose_and_add(two_sweeps):
    import json

    def cols(*extra):
        out = _orch("query", "--best-by", "speedup", "--db", two_sweeps, "--format", "json", *extra)
        return list(json.loads(out.stdout)[0])

    assert {"rank", "method", "speedup", "params", "tokens_per_iteration"} <= set(cols())
    picked = cols("--columns", "ttft_s,params.k")
    assert picked[:4] == ["rank", "method", "group", "pair"] and "params.k" in picked
    assert "tokens_per_iteration" not in picked
    assert "tokens_per_iteration" in cols("--columns", "+k") and "params.k" in cols(
        "--columns", "+k"
    )
    table = _orch("query", "--best-by", "speedup", "--db", two_sweeps, "--columns", "+k,engine")
    assert "engine" in table.stdout.splitlines()[5]
    bad = _orch(
        "query", "--best-by", "speedup", "--db", two_sweeps, "--columns", "colour", ok=False
    )
    assert bad.exit_code == 2 and "unknown --columns name 'colour'" in bad.stderr


def test_compare_names_the_winner_with_spread_tau_and_tasks(two_sweeps):
    import json

    rows = json.loads(_orch("compare", "--db", two_sweeps, "--format", "json").stdout)
    win = next(r for r in rows if r["method"] == "linear" and r["pair"] == "/".join(LL))
    assert win["params"] == "k=4,verifier=greedy" and win["speedup"] == pytest.approx(1.5)
    assert (win["speedup_min"], win["speedup_max"]) == pytest.approx((1.25, 2.0))
    assert win["samples"] == 2 and win["spread_over"] == "prompts x repeats"
    assert win["tokens_per_iteration"] == pytest.approx(2.2)
    assert win["acceptance_rate"] == pytest.approx(0.6)
    # per Spec-Bench task: writing -> mt_bench, translation
    assert win["speedup.mt_bench"] == pytest.approx(2.0)
    assert win["speedup.translation"] == pytest.approx(1.25)
    table = _orch("compare", "--db", two_sweeps).stdout
    lines = table.splitlines()
    assert lines[0].startswith("sweep 'new'") and all(len(x) <= 100 for x in lines[1:])
    row = next(x for x in lines if x.startswith("linear") and "k=4" in x).split()
    # two prompts: a bootstrap replicate is prompt 1 twice (p = 1/4), both (1/2) or prompt 2
    # twice (1/4), so the 2.5% and 97.5% quantiles are the per-prompt speedups themselves
    assert (win["speedup_lo"], win["speedup_hi"]) == pytest.approx((1.25, 2.0))
    assert row[:5] == ["linear", "1.50x", "1.25-2.00", "1", "2.20"]
    assert row[-3:] == ["k=4", "(+1", "fixed)"]  # the varied parameter within 100 columns
    head = next(x for x in lines if x.startswith("method") and "mt_bench" in x).split()
    assert head == ["method", "mt_bench", "translation", "overall"]
    assert "2.00x" in next(x for x in lines if x.startswith("linear") and "1.25x" in x)


def test_reports_default_to_the_most_recent_sweep(two_sweeps):
    import io
    import json

    import pandas as pd

    def methods(*args):
        out = _orch("export", "--db", two_sweeps, "--format", "json", *args)
        return out, sorted({(r["method"], r["throughput"]) for r in json.loads(out.stdout)})

    out, latest = methods()
    assert (("linear", 999.0) not in latest) and len(latest) == 5
    assert out.stderr.startswith("sweep 'new' (the most recent of 2")
    assert methods("--sweep", "old")[1] == [("linear", 999.0)]
    out, every = methods("--all-sweeps")
    assert len(every) == 6 and out.stderr.startswith("all 2 sweeps: 6 finished trials")
    both = _orch("export", "--db", two_sweeps, "--sweep", "old", "--all-sweeps", ok=False)
    assert both.exit_code == 2 and "not both" in both.stderr
    gone = _orch("query", "--best-by", "speedup", "--db", two_sweeps, "--sweep", "nope", ok=False)
    assert gone.exit_code == 2 and "no sweep named 'nope'" in gone.stderr
    csv = pd.read_csv(io.StringIO(_orch("export", "--db", two_sweeps).stdout))
    assert len(csv) == 5  # the source line went to stderr, stdout stays CSV
    for cmd in (["query", "--best-by", "speedup"], ["compare"], ["export"]):
        r = _orch(*cmd, "--db", two_sweeps, "--sweep", "old", ok=False)  # compare: no baseline
        assert "sweep 'old': 1 finished trials" in r.output.splitlines()[0]


def test_export_and_load_name_params_like_mlflow(two_sweeps):
    import io
    import json

    import pandas as pd

    from orchestrator import load

    csv = pd.read_csv(io.StringIO(_orch("export", "--db", two_sweeps).stdout))
    assert {"params.k", "params.verifier", "params"} <= set(csv.columns)
    assert not [c for c in csv.columns if c.startswith("param.")]
    assert sorted(csv["params.k"].dropna()) == [2, 2, 4]
    rows = json.loads(_orch("export", "--db", two_sweeps, "--format", "json").stdout)
    df = load(two_sweeps)
    assert list(df.columns) == list(rows[0]) and len(df) == len(rows) == 5
    assert df.groupby("params.k")["throughput"].mean().to_dict() == {2.0: 160.0, 4.0: 150.0}
    assert set(load(two_sweeps, sweep="old")["params.k"]) == {9}
    assert len(load(two_sweeps, all_sweeps=True)) == 6
    assert "per_prompt" in load(two_sweeps, details=True).columns
    # where filters accept the export's names
    k4 = _orch("export", "--db", two_sweeps, "--where", "params.k=4", "--format", "json")
    assert [r["params.k"] for r in json.loads(k4.stdout)] == [4]
