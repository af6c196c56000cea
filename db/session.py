"""Database engines and sessions, Optuna-storage style.

URL: the `--db` option, else `$ORCH_DB_URL`, else `sqlite:///orch.db`.

- SQLite: WAL journal, a 60 s busy timeout, foreign keys on, and every transaction opened
  with BEGIN IMMEDIATE (the write lock is taken up front, so concurrent writers queue on the
  busy timeout instead of failing with "database is locked" on a read -> write upgrade).
- PostgreSQL (`postgresql+psycopg://user:pw@host/db`): `pool_pre_ping`, a small pool (only the
  driver writes), a 10 s connect timeout.

Passwords never leave this module: URLs are shown with `redact`, and error messages are
passed through `scrub`, which replaces the password wherever it appears.
"""

from __future__ import annotations

import os
import sqlite3
import time
from urllib.parse import quote, quote_plus

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

DEFAULT_URL = "sqlite:///orch.db"
ENV_URL = "ORCH_DB_URL"
SQLITE_BUSY_TIMEOUT_S = 60


class DatabaseError(RuntimeError):
    """A database problem as one password-free line (unreachable, bad URL, old schema)."""


def resolve_url(url: str | None = None) -> str:
    return url or os.environ.get(ENV_URL) or DEFAULT_URL


def redact(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<unparseable database URL>"


def scrub(text: str, url: str) -> str:
    """`text` with the URL's password (raw and URL-encoded forms) replaced by ***."""
    try:
        password = make_url(url).password
    except ArgumentError:
        password = None
    if password:
        for form in {str(password), quote(str(password), safe=""), quote_plus(str(password))}:
            text = text.replace(form, "***")
    return text


def describe_error(e: BaseException, url: str) -> str:
    """The first line of a driver error, without SQL, parameters or the password."""
    orig = getattr(e, "orig", None) or e
    lines = [ln.strip() for ln in str(orig).splitlines() if ln.strip()]
    return scrub(lines[0] if lines else type(orig).__name__, url)


def create_db_engine(url: str | None = None, check: bool = True) -> Engine:
    """An engine for `url` (resolved as above); with `check`, connect once or raise
    DatabaseError with one clear line."""
    url = resolve_url(url)
    try:
        u = make_url(url)
    except ArgumentError:
        raise DatabaseError(
            "invalid database URL (expected e.g. sqlite:///orch.db or "
            "postgresql+psycopg://user@host:5432/db)"
        ) from None
    try:
        if u.get_backend_name() == "sqlite":
            engine = _sqlite_engine(u)
        else:
            args = {"connect_timeout": 10} if u.get_backend_name() == "postgresql" else {}
            engine = create_engine(
                u, pool_pre_ping=True, pool_size=2, max_overflow=4, connect_args=args
            )
    except ModuleNotFoundError as e:
        raise DatabaseError(
            f"database driver {e.name!r} for {redact(url)} is not installed "
            f"(for Postgres: pip install 'treespec-orch[postgres]')"
        ) from None
    except (ArgumentError, SQLAlchemyError) as e:
        raise DatabaseError(
            f"cannot use database {redact(url)}: {describe_error(e, url)}"
        ) from None
    if check:
        try:
            with engine.connect():
                pass
        except SQLAlchemyError as e:
            engine.dispose()
            raise DatabaseError(
                f"cannot connect to database {redact(url)}: {describe_error(e, url)}"
            ) from None
    return engine


def _sqlite_engine(u) -> Engine:
    if u.database and u.database != ":memory:":
        folder = os.path.dirname(os.path.abspath(u.database))
        if not os.path.isdir(folder):
            raise DatabaseError(
                f"cannot open database {u.render_as_string()}: folder {folder} does not exist"
            )
    engine = create_engine(
        u, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False}
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_S * 1000}")
        _set_wal(cur)
        cur.execute("PRAGMA synchronous = NORMAL")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def _set_wal(cur) -> None:
    """Switch a new database file to WAL (the mode persists in the file). While another
    connection is switching the same file, SQLite can answer "database is locked" at once
    instead of waiting on the busy timeout, so openers racing on a fresh file retry here."""
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_S
    while True:
        try:
            if cur.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
                return
            cur.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)
