"""Alembic migrations, run programmatically (`orch db upgrade`) or on first use.

`ensure_schema` creates the schema on an empty database and refuses (one line) a database at
an older revision: upgrading a shared lab database is an explicit `orch db upgrade`.
Concurrent first use is safe: the upgrade runs inside one transaction that holds the SQLite
write lock (BEGIN IMMEDIATE) or a Postgres advisory lock (see migrations/env.py), and Alembic
reads the current revision inside it.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from db.session import DatabaseError, describe_error, redact

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def _config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def head_revision() -> str:
    return ScriptDirectory.from_config(_config()).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> str:
    """Upgrade to `revision`; returns the revision the database is at afterwards."""
    cfg = _config()
    try:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
        return current_revision(engine) or ""
    except SQLAlchemyError as e:
        url = engine.url.render_as_string(hide_password=False)
        raise DatabaseError(f"upgrading {redact(url)} failed: {describe_error(e, url)}") \
            from None


def ensure_schema(engine: Engine) -> None:
    current, head = current_revision(engine), head_revision()
    if current == head:
        return
    if current is None:
        upgrade(engine)
        return
    url = engine.url.render_as_string(hide_password=True)
    raise DatabaseError(f"database {url} has schema revision {current}, this code needs {head}: "
                        f"run `orch db upgrade`")
