"""examples/claims.yaml and the claims table of docs/reproduction.md (generated, never edited:
the table must be what the committed database gives), and the rules of
orchestrator/results/claims.py on a tiny database of hand-made numbers."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli import main
from orchestrator.results.claims import claims_report, load_claims, overall, render_claims
from orchestrator.spec.values import SpecError
from orchestrator.store import Store
from tests.orchestrator.orch_helpers import REPO, fake_config, fake_result

BEGIN, END = "<!-- claims:begin -->", "<!-- claims:end -->"


def test_the_claims_file_parses():
    claims = load_claims(REPO / "examples" / "claims.yaml")
    assert {c.paper for c in claims} >= {"DynaTree", "Delayed", "DySpec", "SALF", "DDTree"}


def test_reproduction_md_holds_the_table_the_committed_database_gives():
    doc = (REPO / "docs" / "reproduction.md").read_text(encoding="utf-8")
    assert doc.count(BEGIN) == 1 and doc.count(END) == 1
    committed = doc[doc.index(BEGIN) + len(BEGIN) : doc.index(END)].strip("\n")
    store = Store(f"sqlite:///{REPO / 'docs' / 'repro' / 'orch.db'}", mode="read")
    try:
        text = render_claims(claims_report(store, load_claims(REPO / "examples/claims.yaml")))
    finally:
        store.close()
    assert committed == text.strip("\n"), (
        "docs/reproduction.md's claims table differs from the database: regenerate it with "
        "orch report --claims examples/claims.yaml --db sqlite:///docs/repro/orch.db "
        "--into docs/reproduction.md"
    )


# --- the rules on hand-made numbers --------------------------------------------------------

# (target, k, tokens per iteration of prompt p0, of p1): 24 tokens a prompt. Equal prompts give
# a point interval; (2, 6) pools to 3.0 with an interval of 2-6, level with everything here.
TRIALS = [
    ("tiny-llama", 1, 6.0, 6.0),
    ("tiny-llama", 2, 4.0, 4.0),
    ("tiny-llama", 3, 2.0, 2.0),
    ("tiny-llama", 4, 2.0, 6.0),
    ("tiny-neox", 1, 2.0, 2.0),
    ("tiny-neox", 2, 4.0, 4.0),
]


@pytest.fixture
def tiny(sqlite_url):
    store = Store(sqlite_url)
    rows = []
    for target, k, *taus in TRIALS:
        cfg = fake_config(method="linear", target=target, draft=f"{target}-draft", k=k)
        per_prompt = [
            {"id": f"p{i}", "new_tokens": 24, "iterations": 24 / t, "total_s": 1.0, "tokens": [1]}
            for i, t in enumerate(taus)
        ]
        res = fake_result(cfg, tokens_per_iteration=48 / sum(24 / t for t in taus))
        rows.append((cfg, dataclasses.replace(res, per_prompt=per_prompt)))
    sid = store.submit("tiny", {"name": "tiny"}, [c for c, _ in rows], "v").sweep_id
    store.begin_run(sid)
    ids = {c.config_hash: i for i, c, _ in store.runnable(sid)}
    for cfg, res in rows:
        store.mark_running(ids[cfg.config_hash], "testhost", None)
        store.record_result(ids[cfg.config_hash], res)
    store.finish_run(sid)
    yield store
    store.close()


def _claims(tmp_path, *entries: str) -> list:
    body = "".join(
        "  - {paper: P, claim: c, source: s, sweep: tiny, metric: tokens_per_iteration, "
        + e
        + "}\n"
        for e in entries
    )
    path = tmp_path / "claims.yaml"
    path.write_text("claims:\n" + body)
    return load_claims(path)


def _verdicts(store, tmp_path, *entries: str) -> list[str]:
    return [overall(o) for _, o in claims_report(store, _claims(tmp_path, *entries))]


def _cells(*ks, **extra) -> str:
    cells = ", ".join(f"k{k}: [k={k}]" for k in ks)
    more = "".join(f", {key}: {value}" for key, value in extra.items())
    return f"where: [target=tiny-llama], cells: {{{cells}}}{more}"


@pytest.mark.parametrize(
    "rule, ks, extra, verdict",
    [
        ("order", (1, 2, 3), {}, "reproduced"),
        ("order", (1, 2, 4), {}, "partly"),  # 4 is level with 2
        ("order", (1, 4, 3), {}, "not reproduced"),
        ("above", (1, 2, 3), {}, "reproduced"),
        ("above", (2, 3, 4), {}, "partly"),
        ("above", (3, 1), {}, "not reproduced"),
        ("below", (1, 2, 3), {}, "reproduced"),
        ("below", (1, 4, 3), {}, "partly"),
        ("below", (3, 1), {}, "not reproduced"),
        ("at_least", (1, 3), {"value": 2}, "reproduced"),  # 3x, above
        ("at_least", (1, 3), {"value": 4}, "partly"),  # above, but 3x < 4x
        ("at_least", (4, 3), {"value": 1.2}, "partly"),  # 1.5x, but level
        ("at_least", (3, 1), {"value": 1.1}, "not reproduced"),
        ("best", (1,), {"among": "[method=linear]"}, "reproduced"),  # the best
        ("best", (4,), {"among": "[method=linear]"}, "reproduced"),  # level with the best
        ("best", (2,), {"among": "[method=linear]"}, "not reproduced"),  # below it
        ("nonincreasing", (1, 2, 3), {}, "reproduced"),
        ("nonincreasing", (1, 4, 3), {}, "reproduced"),  # no rise, the end below the start
        ("nonincreasing", (1, 3, 2), {}, "partly"),  # a rise 3 -> 2 on the way down
        ("nonincreasing", (2, 4), {}, "partly"),  # lower, but within the intervals
        ("nonincreasing", (4, 2), {}, "not reproduced"),  # higher, within the intervals
        ("nonincreasing", (3, 1), {}, "not reproduced"),
        ("nondecreasing", (3, 2, 1), {}, "reproduced"),
        ("nondecreasing", (3, 1, 2), {}, "partly"),  # a fall 1 -> 2 on the way up
        ("nondecreasing", (1, 3), {}, "not reproduced"),
    ],
)
def test_rules_on_hand_made_numbers(tiny, tmp_path, rule, ks, extra, verdict):
    assert _verdicts(tiny, tmp_path, f"rule: {rule}, " + _cells(*ks, **extra)) == [verdict]


def test_the_numbers_intervals_and_trials_are_shown(tiny, tmp_path):
    text = render_claims(claims_report(tiny, _claims(tmp_path, "rule: order, " + _cells(1, 4))))
    assert "k1 6.000 (6.00-6.00); k4 3.000 (2.00-6.00)" in text
    assert "partly" not in text and "**not reproduced**" in text and "k1 level k4" in text
    assert "k=4,verifier=greedy; trials" in text


def test_no_data_for_a_cell_no_trial_matches(tiny, tmp_path):
    (result,) = claims_report(tiny, _claims(tmp_path, "rule: above, " + _cells(1, 9)))
    assert overall(result[1]) == "no data" and result[1][0].why == "no trial for k9"
    (result,) = claims_report(
        tiny,
        _claims(tmp_path, "rule: above, cells: {NDE: [selector=nde], k1: [k=1]}"),
    )
    assert overall(result[1]) == "no data"
    assert result[1][0].why == "no trial for NDE (no trial has selector)"
    assert "| **no data** | no trial for NDE" in render_claims([result])


def test_for_each_decides_each_setting(tiny, tmp_path):
    verdicts = _verdicts(
        tiny,
        tmp_path,
        "rule: above, for_each: [target], cells: {k2: [k=2], k1: [k=1]}",
        "rule: above, for_each: [target], cells: {k1: [k=1], k2: [k=2]}",
        "rule: above, for_each: [target], cells: {k2: [k=2], k3: [k=3]}",  # no k3 on neox
    )
    assert verdicts == ["partly (1 of 2 settings)"] * 3
    only = _verdicts(
        tiny, tmp_path, "rule: above, where: [target=tiny-neox], cells: {k2: [k=2], k1: [k=1]}"
    )
    assert only == ["reproduced"]


# --- bad claims files, refused with one line -----------------------------------------------


@pytest.mark.parametrize(
    "entry, message",
    [
        ("rule: above, cells: {a: [k=1], b: [k=2]}, colour: red", "colour"),
        ("rule: sideways, cells: {a: [k=1], b: [k=2]}", "'sideways' is not one of"),
        ("rule: at_least, cells: {a: [k=1], b: [k=2]}", "value: a number for rule at_least"),
    ],
)
def test_a_bad_claims_file_is_refused_in_one_line(tmp_path, sqlite_url, entry, message):
    path = tmp_path / "bad.yaml"
    path.write_text(
        "claims:\n  - {paper: P, claim: c, source: s, sweep: tiny, "
        f"metric: tokens_per_iteration, {entry}}}\n"
    )
    with pytest.raises(SpecError, match=message):
        load_claims(path)
    r = CliRunner().invoke(
        main, ["report", "--claims", str(path), "--db", sqlite_url, "-o", str(tmp_path / "out")]
    )
    assert r.exit_code != 0 and message in r.output
    assert len(r.output.strip().splitlines()) == 1 and "Traceback" not in r.output
    assert not (tmp_path / "out").exists()


def test_a_sweep_beside_claims_is_refused(tmp_path, sqlite_url):
    r = CliRunner().invoke(
        main,
        ["report", "tiny", "--claims", str(REPO / "examples/claims.yaml"), "--db", sqlite_url],
    )
    assert r.exit_code != 0 and "give no SWEEP" in r.output
    assert len(r.output.strip().splitlines()) == 1 and "Traceback" not in r.output


def test_orch_report_claims_writes_claims_md(tiny, tmp_path, sqlite_url):
    _claims(tmp_path, "rule: order, " + _cells(1, 2, 3))
    out = tmp_path / "out"
    r = CliRunner().invoke(
        main,
        ["report", "--claims", str(tmp_path / "claims.yaml"), "--db", sqlite_url, "-o", str(out)],
    )
    assert r.exit_code == 0, r.output
    assert "**reproduced**" in Path(out / "claims.md").read_text()


def test_orch_report_claims_into_a_documents_marked_block(tiny, tmp_path, sqlite_url):
    _claims(tmp_path, "rule: order, " + _cells(1, 2, 3))
    doc = tmp_path / "doc.md"
    doc.write_text(f"# title\n\nbefore\n{BEGIN}\nold table\n{END}\nafter\n")
    args = ["report", "--claims", str(tmp_path / "claims.yaml"), "--db", sqlite_url]
    r = CliRunner().invoke(main, [*args, "--into", str(doc)])
    assert r.exit_code == 0, r.output
    text = doc.read_text()
    assert text.startswith(f"# title\n\nbefore\n{BEGIN}\n| paper |") and text.endswith(
        f"\n{END}\nafter\n"
    )
    assert "old table" not in text and "**reproduced**" in text
    bare = tmp_path / "bare.md"
    bare.write_text("no markers\n")
    r = CliRunner().invoke(main, [*args, "--into", str(bare)])
    assert r.exit_code == 2 and "needs one <!-- claims:begin --> line" in r.output
    assert bare.read_text() == "no markers\n"
    r = CliRunner().invoke(main, ["report", "--into", str(doc), "--db", sqlite_url])
    assert r.exit_code != 0 and "--into needs --claims" in r.output
