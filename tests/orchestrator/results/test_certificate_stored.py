"""A sweep through `orch submit` stores each trial's certificate and the papers' acceptance
measures in the results' per_prompt JSON (no new columns), on SQLite and on Postgres, and a
trial with the draft at its own temperature is stored with its settings."""

from __future__ import annotations

from click.testing import CliRunner
from sqlalchemy import select

from db.models import Result, Trial
from engine.certify.teacher_forced import GREEDY_CHECK, SAMPLING_CLAIM, trial_certificate
from engine.metrics import acceptance_definitions
from orchestrator.cli import main
from orchestrator.records import TrialConfig
from orchestrator.store import Store

SWEEP = """\
name: certified
pairs: [{target: tiny-llama, draft: tiny-llama-draft}]
dataset: {name: spec_bench, prompts: 2, prompt_tokens: 16}
sampling: {temperature: [0.0, 0.7], draft_temperature: 0.5}
max_new_tokens: 12
methods:
  - name: dyspec
    params: {budget: 6}
"""


def test_certificates_and_acceptance_are_stored(db_url, tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(SWEEP)
    r = CliRunner().invoke(main, ["submit", str(spec), "--db", db_url, "--executor", "local"])
    assert r.exit_code == 0, r.output
    store = Store(db_url)
    with store.Session() as s:
        rows = s.execute(select(Trial.config, Result.per_prompt, Result.per_iteration).join(Result))
        rows = sorted(rows, key=lambda x: x[0]["temperature"])
    store.close()
    assert len(rows) == 2
    (greedy_cfg, greedy_pp, greedy_it), (sampled_cfg, sampled_pp, _) = rows
    assert TrialConfig.from_dict(greedy_cfg).draft_temperature == 0.5
    assert TrialConfig.from_dict(sampled_cfg).draft_temperature == 0.5
    cert = trial_certificate(greedy_pp)
    assert cert["check"] == GREEDY_CHECK and cert["lossless"] is True and cert["prompts"] == 2
    claim = trial_certificate(sampled_pp)
    assert claim["check"] == SAMPLING_CLAIM and claim["lossless"] is None
    assert claim["verifier"] == "specinfer" and claim["verifier_distribution_tested"] is True
    for p, it in zip(greedy_pp, greedy_it):
        assert p["acceptance"] == acceptance_definitions([it])
        assert p["acceptance"]["delayed_acceptance_by_depth"]
    pooled = acceptance_definitions(greedy_it)
    assert pooled["iterations"] == sum(p["iterations"] for p in greedy_pp)
