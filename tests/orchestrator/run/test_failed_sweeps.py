"""Issue 20, part B: a sweep whose trials all failed ends failed (store, CLI, migration 0006),
split from test_terminal.py."""

from __future__ import annotations

from click.testing import CliRunner

from orchestrator.cli import main
from orchestrator.store import Store
from tests.orchestrator.orch_helpers import tiny_sweep

# ---- a sweep whose trials all failed ends failed -----------------------------------------


def test_store_ends_an_all_failed_sweep_failed(db_url):
    import time

    from db.models import SweepStatus
    from orchestrator.records import TrialFailure
    from tests.orchestrator.orch_helpers import fake_config, fake_result

    store = Store(db_url)
    try:
        for name, outcomes in (("allfail", "ff"), ("mixed", "fd")):
            cfgs = [fake_config(i, method="linear", max_new_tokens=9 + len(name)) for i in (1, 2)]
            sid = store.submit(name, {"name": name}, cfgs, "v").sweep_id
            store.begin_run(sid)
            for (tid, cfg, _), o in zip(store.runnable(sid), outcomes):
                assert store.mark_running(tid, "h", None)
                if o == "f":
                    now = time.time()
                    store.record_failure(
                        tid, TrialFailure(cfg.config_hash, "boom", "h", None, now, now)
                    )
                else:
                    store.record_result(tid, fake_result(cfg))
            want = SweepStatus.FAILED if name == "allfail" else SweepStatus.FINISHED
            assert store.sweep_status(sid) == want  # settled by the last outcome
            assert store.finish_run(sid) == want
            # resubmitting the same trials keeps it so; more trials (--replace) reopen it
            assert store.submit(name, {"name": name}, cfgs, "v").sweep_id == sid
            assert store.sweep_status(sid) == want
            more = [*cfgs, fake_config(7, max_new_tokens=30)]
            store.submit(name, {"name": name}, more, "v", replace=True)
            assert store.sweep_status(sid) == SweepStatus.SUBMITTED
    finally:
        store.close()


def test_cli_all_failed_sweep_ends_failed_and_resubmit_names_retry_failed(tmp_path, monkeypatch):
    from orchestrator.run.executors import local

    real = local.run_trial

    def broken(*a, **kw):
        raise RuntimeError("out of memory (simulated)")

    monkeypatch.setenv("ORCH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(local, "run_trial", broken)
    db = f"sqlite:///{tmp_path / 'o.db'}"
    args = ["submit", str(tiny_sweep(tmp_path, "broken")), "--db", db, "--executor", "local"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 1 and "status failed" in r.stdout, r.output
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert "nothing to run: 2 trials failed before; --retry-failed runs them again" in r.stderr
    assert "status failed" in r.stdout
    import json

    st = json.loads(CliRunner().invoke(main, ["status", "--db", db, "--format", "json"]).stdout)
    assert (st[0]["status"], st[0]["failed"]) == ("failed", 2)
    monkeypatch.setattr(local, "run_trial", real)
    r = CliRunner().invoke(main, [*args, "--retry-failed"])
    assert r.exit_code == 0 and "ran 2 (2 done" in r.stdout and "status finished" in r.stdout


def test_migration_0006_marks_all_failed_sweeps_and_goes_back(db_url):
    from sqlalchemy import text

    from db import create_db_engine, head_revision, upgrade
    from db.migrate import downgrade

    engine = create_db_engine(db_url)
    try:
        upgrade(engine, "0005")
        with engine.begin() as c:
            c.execute(
                text(
                    "INSERT INTO sweeps (id, name, description, spec, status, code_version) "
                    "VALUES (1, 'allfail', '', '{}', 'finished', 'v'), "
                    "(2, 'mixed', '', '{}', 'finished', 'v'), (3, 'empty', '', '{}', 'finished', 'v')"
                )
            )
            for i, status in ((1, "failed"), (2, "failed"), (3, "done")):
                c.execute(
                    text(
                        "INSERT INTO trials (id, config_hash, config, method, target, draft, "
                        "dataset, temperature, max_new_tokens, repeat, status, attempts) VALUES "
                        "(:i, :h, '{}', 'linear', 't', 'd', 'ds', 0, 8, 0, :s, 1)"
                    ),
                    {"i": i, "h": f"h{i}", "s": status},
                )
            c.execute(text("INSERT INTO sweep_trials VALUES (1, 1), (1, 2), (2, 2), (2, 3)"))

        def statuses():
            with engine.connect() as c:
                return dict(c.execute(text("SELECT name, status FROM sweeps")).all())

        assert upgrade(engine) == head_revision()
        assert statuses() == {"allfail": "failed", "mixed": "finished", "empty": "finished"}
        assert downgrade(engine, "0005") == "0005"
        assert statuses() == {"allfail": "finished", "mixed": "finished", "empty": "finished"}
        assert upgrade(engine) == head_revision()
    finally:
        engine.dispose()
