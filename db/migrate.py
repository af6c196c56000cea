"""Alembic migrations, run programmatically (`orch db upgrade`) or on first use.

`ensure_schema` creates the schema on an empty database (unless told not to: commands that only
read never create anything) and refuses (one line) a database at an older revision: upgrading a
shared lab database is an explicit `orch db upgrade`. A database at a revision this code does
not know was migrated by newer code; it is refused with the revision it needs, never touched.
Concurrent first use is safe: the upgrade runs inside one transaction that holds the SQLite
write lock (BEGIN IMMEDIATE) or a Postgres advisory lock (see migrations/env.py), and Alembic
reads the current revision inside it.

On SQLite that transaction runs with foreign keys off (`migration_transaction`): a batch
migration copies a table and drops the old one, and with foreign keys on, SQLite deletes the
old table's rows first and cascades the deletes to the rows that reference them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from db.session import DatabaseError, describe_error, redact

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def _config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def head_revision() -> str:
    return ScriptDirectory.from_config(_config()).get_current_head()


def known_revisions() -> set[str]:
    return {s.revision for s in ScriptDirectory.from_config(_config()).walk_revisions()}


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


@contextmanager
def migration_transaction(engine: Engine) -> Iterator[Connection]:
    """A connection in one transaction for schema changes. On SQLite foreign keys are off
    inside it (the pragma is a no-op within a transaction, so it is set before), checked
    with `PRAGMA foreign_key_check` before the commit, and on again afterwards."""
    with engine.connect() as conn:
        sqlite = engine.dialect.name == "sqlite"
        if sqlite:
            conn.connection.driver_connection.execute("PRAGMA foreign_keys = OFF")
        try:
            with conn.begin():
                yield conn
                if sqlite:
                    broken = conn.exec_driver_sql("PRAGMA foreign_key_check").first()
                    if broken is not None:
                        raise DatabaseError(
                            f"migration left a row of table {broken[0]} "
                            f"without its {broken[2]} row; rolled back"
                        )
        finally:
            if sqlite:
                conn.connection.driver_connection.execute("PRAGMA foreign_keys = ON")


def upgrade(engine: Engine, revision: str = "head") -> str:
    """Upgrade to `revision`; returns the revision the database is at afterwards."""
    return _migrate(engine, command.upgrade, revision, "upgrading")


def downgrade(engine: Engine, revision: str) -> str:
    """Downgrade to `revision`; returns the revision the database is at afterwards."""
    return _migrate(engine, command.downgrade, revision, "downgrading")


def _migrate(engine: Engine, step, revision: str, doing: str) -> str:
    cfg = _config()
    url = engine.url.render_as_string(hide_password=False)
    try:
        _refuse_newer(engine, current_revision(engine))
        with migration_transaction(engine) as conn:
            cfg.attributes["connection"] = conn
            step(cfg, revision)
        return current_revision(engine) or ""
    except SQLAlchemyError as e:
        raise DatabaseError(f"{doing} {redact(url)} failed: {describe_error(e, url)}") from None
    except CommandError as e:  # e.g. an unknown target revision
        raise DatabaseError(f"{doing} {redact(url)} failed: {describe_error(e, url)}") from None


def _refuse_newer(engine: Engine, current: str | None) -> None:
    if current is None or current in known_revisions():
        return
    url = engine.url.render_as_string(hide_password=True)
    raise DatabaseError(
        f"database {url} has schema revision {current}, newer than this code (it knows "
        f"revisions up to {head_revision()}): use a treespec-orch with migration {current} "
        f"(db/migrations/versions), or a database of this version"
    )


def ensure_schema(engine: Engine, create: bool = True) -> None:
    """Return when the database is at this code's head revision; with `create`, create the
    schema on an empty database; else DatabaseError (one line)."""
    current, head = current_revision(engine), head_revision()
    if current == head:
        return
    url = engine.url.render_as_string(hide_password=True)
    if current is None:
        if not create:
            raise DatabaseError(
                f"database {url} has no orch tables yet (nothing was submitted to it): check "
                f"the URL, or create them with `orch db upgrade`"
            )
        upgrade(engine)
        return
    _refuse_newer(engine, current)
    raise DatabaseError(
        f"database {url} has schema revision {current}, this code needs {head}: "
        f"run `orch db upgrade`"
    )
