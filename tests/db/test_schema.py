"""The migrated schema on SQLite and on the real Postgres server: the result columns are the
engine's metrics, the status columns hold only their enums' values, and upgrading a database
with rows in it keeps them."""

from __future__ import annotations

import json
import re

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.exc import IntegrityError

from db import DatabaseError, create_db_engine, current_revision, head_revision, upgrade
from db.migrate import downgrade
from db.models import METRIC_COLUMNS, Base, SweepStatus, TrialStatus
from engine.metrics import METRICS
from orchestrator.store import Store
from tests.orchestrator.orch_helpers import fake_config

NOT_METRICS = {"id", "trial_id", "config_hash", "per_prompt", "per_iteration", "created_at"}
ROWS = {
    "sweeps": 2,
    "trials": len(TrialStatus),
    "sweep_trials": len(TrialStatus),
    "results": 1,
    "models": 1,
    "datasets": 1,
}


@pytest.fixture
def engine(db_url):
    engine = create_db_engine(db_url)
    yield engine
    engine.dispose()


def test_result_columns_are_the_engine_metrics(engine):
    upgrade(engine)
    columns = {c["name"]: c for c in inspect(engine).get_columns("results")}
    metric_columns = {n: c["type"].python_type for n, c in columns.items() if n not in NOT_METRICS}
    assert metric_columns == {m.name: m.type for m in METRICS}
    assert not any(columns[m.name]["nullable"] for m in METRICS)
    assert set(METRIC_COLUMNS) == {m.name for m in METRICS}


def test_check_constraints_match_models(engine):
    """What alembic's compare_metadata does not compare: CHECK constraints, by name and by
    the values they allow."""
    upgrade(engine)
    insp = inspect(engine)
    for table in Base.metadata.sorted_tables:
        reflected = {
            c["name"]: set(re.findall(r"'(\w+)'", c["sqltext"]))
            for c in insp.get_check_constraints(table.name)
        }
        declared = {
            c.name: set(
                re.findall(
                    r"'(\w+)'",
                    str(c.sqltext.compile(engine, compile_kwargs={"literal_binds": True})),
                )
            )
            for c in table.constraints
            if c.__class__.__name__ == "CheckConstraint"
        }
        assert reflected == declared, table.name
    names = {c["name"] for t in ("trials", "sweeps") for c in insp.get_check_constraints(t)}
    assert names == {"ck_trials_status", "ck_sweeps_status"}


@pytest.mark.parametrize(
    "table, row",
    [
        (
            "trials",
            "(config_hash, config, method, target, draft, dataset, temperature, "
            "max_new_tokens, repeat, status, attempts) VALUES ('h', '{}', 'm', 't', 'd', "
            "'ds', 0, 8, 0, :status, 0)",
        ),
        (
            "sweeps",
            "(name, description, spec, status, code_version) VALUES ('s', '', '{}', :status, 'v')",
        ),
    ],
)
def test_a_bad_status_is_refused_by_the_database(engine, table, row):
    upgrade(engine)
    for status in ("bogus", "DONE", ""):
        with pytest.raises(IntegrityError):
            with engine.begin() as c:
                c.execute(text(f"INSERT INTO {table} {row}"), {"status": status})
    enum = TrialStatus if table == "trials" else SweepStatus
    with engine.begin() as c:
        c.execute(text(f"INSERT INTO {table} {row}"), {"status": enum.RUNNING.value})
        with pytest.raises(IntegrityError):
            with c.begin_nested():
                c.execute(text(f"UPDATE {table} SET status = 'bogus'"))
        assert c.execute(text(f"SELECT status FROM {table}")).scalar() == "running"


def _fill_0001(engine) -> None:
    """Rows in every table of schema 0001, one trial per status, through plain SQL (the ORM
    models describe the newest schema)."""
    metrics = [m.name for m in METRICS]
    with engine.begin() as c:
        c.execute(
            text(
                "INSERT INTO sweeps (id, name, description, spec, status, code_version) "
                "VALUES (1, 'a', '', '{}', 'finished', 'v'), "
                "(2, 'b', '', '{}', 'interrupted', 'v')"
            )
        )
        for i, status in enumerate(TrialStatus, start=1):
            c.execute(
                text(
                    "INSERT INTO trials (id, config_hash, config, method, target, draft, dataset, "
                    "temperature, max_new_tokens, repeat, status, attempts) VALUES (:i, :h, :config, "
                    "'linear', 't', 'd', 'ds', 0, 8, 0, :status, 1)"
                ),
                {
                    "i": i,
                    "h": f"h{i}",
                    "config": json.dumps(fake_config(i).to_dict()),
                    "status": status.value,
                },
            )
            c.execute(text("INSERT INTO sweep_trials VALUES (:s, :i)"), {"s": 1 + i % 2, "i": i})
        c.execute(
            text(
                f"INSERT INTO results (trial_id, config_hash, {', '.join(metrics)}, "
                f"per_prompt, per_iteration) VALUES (3, 'h3', "
                f"{', '.join(['2'] * len(metrics))}, '[]', '[]')"
            )
        )
        c.execute(text("INSERT INTO models (name) VALUES ('tiny-llama')"))
        c.execute(text("INSERT INTO datasets (name) VALUES ('spec_bench')"))


def _counts(engine) -> dict[str, int]:
    with engine.connect() as c:
        return {t: c.execute(text(f"SELECT count(*) FROM {t}")).scalar() for t in ROWS}


def test_upgrading_a_0001_database_with_rows_keeps_them(engine, db_url):
    """Batch mode copies trials and sweeps on SQLite; with foreign keys on, dropping the old
    tables would cascade to results and sweep_trials."""
    assert upgrade(engine, "0001") == "0001"
    _fill_0001(engine)
    assert _counts(engine) == ROWS
    assert upgrade(engine) == head_revision()
    assert _counts(engine) == ROWS
    store = Store(db_url)
    counts = {r["sweep"]: r for r in store.counts()}
    assert (counts["a"]["status"], counts["b"]["status"]) == ("finished", "interrupted")
    assert counts["b"]["status"] is SweepStatus.INTERRUPTED  # read back as the enum
    assert {t: counts["a"][t] for t in TrialStatus} == {
        "pending": 0,
        "running": 1,
        "done": 0,
        "failed": 1,
        "cancelled": 0,
    }
    assert {t: counts["b"][t] for t in TrialStatus} == {
        "pending": 1,
        "running": 0,
        "done": 1,
        "failed": 0,
        "cancelled": 1,
    }
    assert [t["status"] for t in store.trials(1, (TrialStatus.RUNNING, TrialStatus.FAILED))] == [
        TrialStatus.RUNNING,
        TrialStatus.FAILED,
    ]
    store.close()
    if engine.dialect.name == "sqlite":
        with engine.connect() as c:
            assert c.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert c.exec_driver_sql("PRAGMA foreign_key_check").all() == []
    # and back: the constraints go, the rows stay
    assert downgrade(engine, "0001") == "0001"
    assert _counts(engine) == ROWS
    assert not inspect(engine).get_check_constraints("trials")
    with engine.begin() as c:
        c.execute(text("UPDATE trials SET status = 'bogus' WHERE id = 1"))
        c.execute(text("UPDATE trials SET status = 'pending' WHERE id = 1"))
    assert upgrade(engine) == head_revision()
    assert _counts(engine) == ROWS


def test_an_upgrade_refuses_a_row_with_a_bad_status(engine):
    upgrade(engine, "0001")
    _fill_0001(engine)
    with engine.begin() as c:
        c.execute(text("UPDATE trials SET status = 'bogus' WHERE id = 1"))
    with pytest.raises(DatabaseError, match="upgrading"):
        upgrade(engine)
    assert _counts(engine) == ROWS  # rolled back whole
    assert current_revision(engine) == "0001"


def _shape(engine, table: str) -> tuple[set, set]:
    """A table's CHECK constraints (name, allowed values) and indexes (name, columns)."""
    insp = inspect(engine)
    checks = {
        (c["name"], tuple(sorted(re.findall(r"'(\w+)'", c["sqltext"]))))
        for c in insp.get_check_constraints(table)
    }
    indexes = {(i["name"], tuple(i["column_names"])) for i in insp.get_indexes(table)}
    return checks, indexes


def test_0003_adds_lease_columns_and_goes_back_keeping_rows(engine, db_url):
    """0003 adds trials.owner, lease_until and worker_node; a trial left running by a driver
    of the old schema has no lease, so it is runnable at once. Down again (SQLite copies the
    table) the rows, the CHECK constraint and the indexes are kept."""
    assert upgrade(engine, "0002") == "0002"
    _fill_0001(engine)
    before = _shape(engine, "trials")
    assert ("ck_trials_status", tuple(sorted(t.value for t in TrialStatus))) in before[0]
    assert upgrade(engine) == head_revision()
    assert _counts(engine) == ROWS and _shape(engine, "trials") == before
    columns = {c["name"]: c for c in inspect(engine).get_columns("trials")}
    for name, python_type in [("owner", str), ("lease_until", float), ("worker_node", str)]:
        assert columns[name]["nullable"] and columns[name]["type"].python_type is python_type
    assert columns["worker_node"]["type"].length == 64
    store = Store(db_url)
    running = [t["trial"] for t in store.trials(1, (TrialStatus.RUNNING,))]
    assert running and [i for i, _, _ in store.runnable(1)] == running
    store.close()
    assert downgrade(engine, "0002") == "0002"
    assert _counts(engine) == ROWS and _shape(engine, "trials") == before
    assert "owner" not in {c["name"] for c in inspect(engine).get_columns("trials")}
    if engine.dialect.name == "sqlite":
        with engine.connect() as c:
            assert c.exec_driver_sql("PRAGMA foreign_key_check").all() == []
