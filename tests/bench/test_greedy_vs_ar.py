"""bench/greedy_vs_ar.py: greedy trials are compared token for token with the sweep's
autoregressive trial, and a changed token is found (tiny pairs, local executor, SQLite)."""

from __future__ import annotations

from click.testing import CliRunner
from sqlalchemy import select, update

from bench.greedy_vs_ar import compare
from db.models import Result
from orchestrator.cli import main
from orchestrator.store import Store
from tests.orchestrator.orch_helpers import sweep_24


def test_greedy_trials_equal_autoregressive_and_a_changed_token_is_caught(tmp_path):
    url = f"sqlite:///{tmp_path / 'g.db'}"
    r = CliRunner().invoke(
        main,
        ["submit", str(sweep_24(tmp_path / "s.yaml")), "--db", url, "--executor", "local",
         "--no-progress", "--only", "target=tiny-llama", "--only", "method=autoregressive,linear"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    store = Store(url)
    rows = compare(store, "tiny24")
    assert len(rows) == 5 and all(r["equal"] for r in rows)  # linear k = 1..5 on tiny-llama
    victim = rows[2]["trial"]
    with store.Session() as s:
        pp = s.scalar(select(Result.per_prompt).where(Result.trial_id == victim))
        pp[0]["tokens"][3] += 1
        s.execute(update(Result).where(Result.trial_id == victim).values(per_prompt=pp))
        s.commit()
    rows = {r["trial"]: r for r in compare(store, "tiny24")}
    assert rows[victim]["equal"] is False and rows[victim]["first_diff_prompt"] == 0
    assert sum(r["equal"] for r in rows.values()) == 4
    store.close()
