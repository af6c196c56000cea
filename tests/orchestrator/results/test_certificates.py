"""`orch certify` and the certificate columns (orchestrator/results/certificates.py), on SQLite
and Postgres: which check each sampled trial needs, checks run once per setting and stored,
`lossless` and `ar_equal` in query, compare and the report's cell.

The check itself (engine/certify/distribution.py) is tested in tests/engine/
test_distribution_check.py; here a stand-in records which settings it was asked for."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from sqlalchemy import select

import engine.certify.distribution as dc
import orchestrator.results.certificates as certificates
from db.models import Result, VerifierCheck
from engine.config import ConfigError
from orchestrator.cli import main
from orchestrator.records import TrialConfig
from orchestrator.results.certificates import key, load_checks, save_check, trial_setting
from orchestrator.results.paper.configs import certificate_cell
from orchestrator.store import Store

SWEEP = """\
name: certs
pairs: [{target: tiny-llama, draft: tiny-llama-draft}]
dataset: {name: spec_bench, prompts: 2, prompt_tokens: 16}
sampling: {temperature: [0.0, 1.0]}
max_new_tokens: 6
methods:
  - name: autoregressive
  - name: iid
    params: {K: 2, L: 2}
    grid: {verifier: [specinfer, traversal]}
  - name: dyspec
    params: {budget: 4}
    sampling: {draft_temperature: 0.6}
"""


def config(method="iid", temperature=1.0, **kw) -> TrialConfig:
    params = kw.pop("params", {"K": 2, "L": 2, "verifier": "traversal"})
    return TrialConfig(
        "tiny-llama", "tiny-llama-draft", "spec_bench", 2, method, params, 6, temperature, **kw
    )


def test_the_check_a_trial_needs():
    s = trial_setting(config(top_p=0.9))
    assert (s.verifier, s.tree_sampling, s.temperature, s.top_p) == ("traversal", "iid", 1.0, 0.9)
    assert key(s) == ("traversal", "iid", 1.0, 0.9, 1.0, 0.9)  # the draft's resolved
    drafted = config("dyspec", 0.7, params={"budget": 4, "verifier": "specinfer"},
                     draft_temperature=0.5)  # fmt: skip
    assert key(trial_setting(drafted)) == ("specinfer", "without_replacement", 0.7, 1.0, 0.5, 1.0)
    assert trial_setting(config(temperature=0.0)) is None  # checked one trial at a time
    assert trial_setting(config("autoregressive", params={"verifier": "naive"})) is None
    # a pairing no sweep accepts (greedy at T = 1) has no check to rest on, and no error
    assert trial_setting(config(params={"K": 2, "L": 2, "verifier": "greedy"})) is None


@pytest.fixture
def fake_check(monkeypatch):
    """dc.check without the generate() calls: passes unless the verifier is in `failing`."""
    asked: list[dc.Setting] = []
    failing: set[str] = set()

    def check(s, pair=None, seeds=dc.SEEDS):
        asked.append(s)
        ok = s.verifier not in failing
        return {**vars(s), "samples": seeds, "p_value": 0.5 if ok else 1e-9, "support_ok": True,
                "alpha": dc.ALPHA, "power": 1.0, "passed": ok, "informative": True,
                "seconds": 0.01}  # fmt: skip

    monkeypatch.setattr(certificates, "check", check)
    monkeypatch.setattr(certificates, "check_pair", lambda: None)
    return asked, failing


def run(*args):
    return CliRunner().invoke(main, list(args))


def submitted(db_url, tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(SWEEP)
    r = run("submit", str(spec), "--db", db_url, "--executor", "local", "--no-progress")
    assert r.exit_code == 0, r.output


def test_certify_runs_each_setting_once_and_stores_it(db_url, tmp_path, fake_check):
    asked, _ = fake_check
    submitted(db_url, tmp_path)
    r = run("certify", "--db", db_url)
    assert r.exit_code == 0, r.output
    # T = 1: traversal and specinfer on i.i.d. trees; DySpec's draft at 0.6 draws without
    # replacement, verified by specinfer; T = 0 trials and autoregressive need none
    assert sorted(key(s) for s in asked) == [
        ("specinfer", "iid", 1.0, 1.0, 1.0, 1.0),
        ("specinfer", "without_replacement", 1.0, 1.0, 0.6, 1.0),
        ("traversal", "iid", 1.0, 1.0, 1.0, 1.0),
    ]
    assert r.output.count("[ran ") == 3 and "3 of 3 checks passed" in r.output
    again = run("certify", "--db", db_url)
    assert again.exit_code == 0 and again.output.count("[stored]") == 3 and len(asked) == 3
    rerun = run("certify", "certs", "--rerun", "--db", db_url)
    assert rerun.exit_code == 0 and len(asked) == 6
    store = Store(db_url, mode="read")
    with store.Session() as s:
        assert len(s.execute(select(VerifierCheck)).all()) == 3  # replaced, not added
    store.close()


def test_a_failed_check_exits_1_and_shows_in_query(db_url, tmp_path, fake_check):
    _, failing = fake_check
    failing.add("traversal")
    submitted(db_url, tmp_path)
    before = run("query", "--best-by", "tokens_per_iteration", "--where", "lossless=claimed",
                 "--db", db_url, "--format", "json")  # fmt: skip
    assert before.exit_code == 0, before.output
    assert len(json.loads(before.stdout)) == 3  # the three drafted configs at T = 1
    r = run("certify", "--db", db_url)
    assert r.exit_code == 1 and "FAILED" in r.output and "2 of 3 checks passed" in r.output
    q = run("query", "--best-by", "tokens_per_iteration", "--where", "temperature=1",
            "--columns", "params,lossless,ar_equal", "--db", db_url, "--format", "json")  # fmt: skip
    assert q.exit_code == 0, q.output
    words = {row["params"]: row["lossless"] for row in json.loads(q.stdout)}
    assert words["K=2,L=2,verifier=traversal"] == "failed"
    assert words["K=2,L=2,verifier=specinfer"] == "tested"
    assert words["verifier=naive"] == "exact"  # autoregressive sampling
    assert {row["ar_equal"] for row in json.loads(q.stdout)} == {"-"}


def test_greedy_trials_are_checked_and_compared_with_autoregressive(db_url, tmp_path):
    submitted(db_url, tmp_path)
    store = Store(db_url)
    with store.Session() as s:  # one greedy trial's second prompt made different and lossy
        res = s.execute(select(Result).where(Result.per_prompt.is_not(None))).scalars().all()
        res = [x for x in res if x.per_prompt[0]["method"] == "dyspec"
               and x.per_prompt[0]["certificate"]["check"] == "greedy_teacher_forced"]  # fmt: skip
        pp = [dict(p) for p in res[0].per_prompt]
        pp[1] = {**pp[1], "tokens": [*pp[1]["tokens"][:-1], pp[1]["tokens"][-1] + 1]}
        pp[1]["certificate"] = {**pp[1]["certificate"], "lossless": False, "first_mismatch": 5,
                                "mismatches": 1, "max_margin": 0.5}  # fmt: skip
        res[0].per_prompt = pp
        s.commit()
    store.close()
    q = run("query", "--best-by", "tokens_per_iteration", "--where", "temperature=0",
            "--columns", "+lossless,ar_equal", "--db", db_url, "--format", "json")  # fmt: skip
    assert q.exit_code == 0, q.output
    rows = {r["method"] + r["params"]: (r["lossless"], r["ar_equal"]) for r in json.loads(q.stdout)}
    assert rows.pop(
        "dyspecbudget=4,reorder=True,threshold=0.001,variant=fixed_size,verifier=greedy"
    ) == ("mismatch", "1/2")  # noqa: E501
    assert set(rows.values()) == {("checked", "2/2")}
    c = run("compare", "--where", "temperature=0", "--db", db_url)
    assert c.exit_code == 0 and " lossless " in c.output and " mismatch " in c.output
    mism = run("query", "--best-by", "tokens_per_iteration", "--where", "lossless=mismatch",
               "--db", db_url, "--format", "json")  # fmt: skip
    assert [r["method"] for r in json.loads(mism.stdout)] == ["dyspec"]


def test_the_report_cell_names_the_check():
    claim = {"check": "sampling_verifier_claim", "verifier": "specinfer", "tree_sampling": "iid",
             "verifier_declares_lossless": True, "verifier_distribution_tested": True}  # fmt: skip
    trial = {"method": "iid", "per_prompt": [{"certificate": claim}]}
    assert certificate_cell([{**trial, "lossless": "claimed"}]) == (
        "claimed: specinfer on iid trees, distribution-tested"
    )
    assert certificate_cell([{**trial, "lossless": "tested"}]) == (
        "tested: specinfer on iid trees, distribution check passed"
    )
    assert certificate_cell([{**trial, "lossless": "tested"}, {**trial, "lossless": "failed"}])\
        .startswith("FAILED: specinfer on iid trees")  # fmt: skip
    ok = {"check": "greedy_teacher_forced", "lossless": True, "checked": 6, "first_mismatch": None}
    greedy = {"method": "iid", "per_prompt": [{"certificate": ok}] * 2, "ar_equal": "2/2"}
    assert certificate_cell([greedy]) == "lossless: greedy check, 2/2 prompts; = AR 2/2"
    assert certificate_cell([{**greedy, "method": "autoregressive"}]) == (
        "lossless: greedy check, 2/2 prompts"
    )


def test_a_stored_check_is_found_by_its_resolved_key(sqlite_url, tmp_path):
    Store(sqlite_url).close()  # creates the schema
    store = Store(sqlite_url, mode="write")
    record = {**vars(dc.Setting("naive", "iid", 0.6)), "samples": 10, "p_value": 0.3,
              "support_ok": True, "alpha": 1e-4, "power": 0.9, "passed": True, "seconds": 1.0}  # fmt: skip
    save_check(store, record, "abc")
    found = load_checks(store)[("naive", "iid", 0.6, 1.0, 0.6, 1.0)]
    assert found["draft_temperature"] == 0.6 and found["code_version"] == "abc"
    store.close()
    with pytest.raises(ConfigError):
        dc.Setting("greedy", "iid", 1.0)


def test_the_report_lists_the_checks_and_the_missing_ones(sqlite_url, tmp_path, fake_check):
    submitted(sqlite_url, tmp_path)
    r = run("report", "--db", sqlite_url, "-o", str(tmp_path / "before"))
    assert r.exit_code == 0, r.output
    md = (tmp_path / "before" / "report.md").read_text()
    assert "3 settings (3 trials) have no stored check yet: orch certify certs runs them" in md
    assert "claimed: traversal on iid trees" in md
    assert run("certify", "--db", sqlite_url).exit_code == 0
    r = run("report", "--db", sqlite_url, "-o", str(tmp_path / "after"))
    md = (tmp_path / "after" / "report.md").read_text()
    assert "no stored check yet" not in md
    assert "| traversal | iid | 1 | 1 | target's | 1 | 600 | 0.5 | 1.000 | passed |" in md
    assert "| specinfer | without\\_replacement | 1 | 1 | T=0.6 top-p=1 | 1 | 600 |" in md
    assert "tested: traversal on iid trees, distribution check passed" in md


def test_the_word_of_a_trial_without_a_check():
    from orchestrator.results.certificates import lossless_word

    row = {**config().to_dict(), "param.K": 2, "param.L": 2, "param.verifier": "traversal"}
    del row["params"]
    claim = {"check": "sampling_verifier_claim", "verifier": "traversal", "tree_sampling": "iid",
             "verifier_declares_lossless": True}  # fmt: skip
    assert lossless_word(row, [{"certificate": claim}], {}) == "claimed"
    stored = {("traversal", "iid", 1.0, 1.0, 1.0, 1.0): {"passed": True}}
    assert lossless_word(row, [{"certificate": claim}], stored) == "tested"
    lossy = {**claim, "verifier_declares_lossless": False}
    assert lossless_word(row, [{"certificate": lossy}], stored) == "lossy"
    assert lossless_word(row, [{}], stored) == "uncertified"  # certify: false
    ar = {**row, "method": "autoregressive", "param.K": None, "param.L": float("nan")}
    assert lossless_word(ar, [{"certificate": {**claim, "tree_sampling": None}}], {}) == "exact"
