"""status, resume and cancel name their sweep as SWEEP or `--sweep NAME`, as the reports do."""

from __future__ import annotations

import pytest

from orchestrator.store import Store
from tests.orchestrator.orch_helpers import fake_config, orch


@pytest.fixture()
def db(tmp_path):
    url = f"sqlite:///{tmp_path / 'o.db'}"
    store = Store(url)
    store.submit("mine", {"name": "mine"}, [fake_config(2)], "v")
    store.close()
    return url


@pytest.mark.parametrize("how", [["mine"], ["--sweep", "mine"]])
def test_status_and_cancel_take_either_form(db, how):
    r = orch("status", *how, "--db", db, "--format", "json")
    assert r.returncode == 0 and '"mine"' in r.stdout
    r = orch("cancel", *how, "--db", db)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["status", "mine", "--sweep", "other"], "two sweeps named: 'mine' and --sweep 'other'"),
        (["cancel"], "name the sweep: SWEEP or --sweep NAME"),
        (["resume", "--sweep", "nosuch"], "nosuch"),
    ],
)
def test_sweep_name_errors_are_one_line(db, args, message):
    r = orch(*args, "--db", db)
    assert r.returncode == 2 and message in r.stderr
    assert r.stderr.strip().count("\n") == 0 and r.stderr.startswith("error: ")
