"""Database engines and sessions, Optuna-storage style.

URL: the `--db` option (or the file named by `--db-file`), else `$ORCH_DB_URL`, else the file
named by `$ORCH_DB_URL_FILE`, else `sqlite:///orch.db`. A file keeps a password off every
command line (`ps`); it holds the URL on one line.

- SQLite: WAL journal, a 60 s busy timeout, foreign keys on, and every transaction opened
  with BEGIN IMMEDIATE (the write lock is taken up front, so concurrent writers queue on the
  busy timeout instead of failing with "database is locked" on a read -> write upgrade).
- PostgreSQL (`postgresql+psycopg://user:pw@host/db`): `pool_pre_ping`, a small pool (only the
  driver writes), a 10 s connect timeout. URLs as users write them work too (`normalize_url`):
  `postgres://` (Heroku, Django) and `postgresql://` without a driver use psycopg 3 (the
  `postgres` extra) when psycopg2 is not installed. Other schemes (mysql://, ...) are refused
  with one line: the store speaks only SQLite and PostgreSQL.

Passwords never leave this module: URLs are shown with `redact`, and error messages are
passed through `scrub`, which replaces the password wherever it appears.
"""

from __future__ import annotations

import importlib.util
import os
import sqlite3
import time
from urllib.parse import quote, quote_plus

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

DEFAULT_URL = "sqlite:///orch.db"
ENV_URL = "ORCH_DB_URL"
ENV_URL_FILE = "ORCH_DB_URL_FILE"
SQLITE_BUSY_TIMEOUT_S = 60
POSTGRES_EXTRA = "pip install 'treespec-orch[postgres]'"
SUPPORTED = "sqlite:///PATH or postgresql://user@host:5432/db"


class DatabaseError(RuntimeError):
    """A database problem as one password-free line (unreachable, bad URL, old schema)."""


def resolve_url(url: str | None = None) -> str:
    if url:
        return url
    if os.environ.get(ENV_URL):
        return os.environ[ENV_URL]
    if os.environ.get(ENV_URL_FILE):
        return read_url_file(os.environ[ENV_URL_FILE], ENV_URL_FILE)
    return DEFAULT_URL


def read_url_file(path: str, label: str = "--db-file") -> str:
    """The database URL held in file `path` (surrounding whitespace ignored); DatabaseError
    naming `label` and the path, never the content, when it cannot be used."""
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as f:
            url = f.read().strip()
    except OSError as e:
        raise DatabaseError(f"cannot read {label} {path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise DatabaseError(f"{label} {path} is not UTF-8 text") from None
    if not url:
        raise DatabaseError(f"{label} {path} is empty (it should hold the database URL)")
    if "\n" in url:
        raise DatabaseError(f"{label} {path} holds more than one line (give the URL alone)")
    return url


def redact(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<unparseable database URL>"


def secret_forms(url: str) -> set[str]:
    """The URL's password as it may appear in text: raw and URL-encoded (empty: none)."""
    try:
        password = make_url(url).password
    except ArgumentError:
        return set()
    if not password:
        return set()
    return {str(password), quote(str(password), safe=""), quote_plus(str(password))}


def scrub(text: str, url: str) -> str:
    """`text` with the URL's password (raw and URL-encoded forms) replaced by ***."""
    for form in sorted(secret_forms(url), key=len, reverse=True):
        text = text.replace(form, "***")
    return text


def describe_error(e: BaseException, url: str) -> str:
    """The first line of a driver error, without SQL, parameters or the password."""
    orig = getattr(e, "orig", None) or e
    lines = [ln.strip() for ln in str(orig).splitlines() if ln.strip()]
    return scrub(lines[0] if lines else type(orig).__name__, url)


def create_db_engine(
    url: str | None = None, check: bool = True, must_exist: bool = False, writable: bool = False
) -> Engine:
    """An engine for `url` (resolved as above); with `check`, connect once or raise
    DatabaseError with one clear line. For a SQLite file, `must_exist` refuses a missing file
    (instead of creating an empty one) and `writable` a file or folder this process cannot
    write (SQLite writes the -wal and -shm files beside the database)."""
    url = resolve_url(url)
    u = normalize_url(url)
    try:
        if u.get_backend_name() == "sqlite":
            _check_sqlite_file(u.database, must_exist, writable)
            engine = _sqlite_engine(u, wal=writable or not must_exist)
        else:
            args = {"connect_timeout": 10} if u.get_backend_name() == "postgresql" else {}
            engine = create_engine(
                u, pool_pre_ping=True, pool_size=2, max_overflow=4, connect_args=args
            )
    except ModuleNotFoundError as e:
        fix = POSTGRES_EXTRA if e.name == "psycopg" else f"pip install {e.name}"
        raise DatabaseError(
            f"database driver {e.name!r} for {redact(url)} is not installed: {fix}"
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


def normalize_url(url: str) -> URL:
    """`url` parsed, as SQLAlchemy needs it: `postgres://` becomes `postgresql://`, and a
    `postgresql://` without a driver uses psycopg 3 (what the `postgres` extra installs) unless
    psycopg2, SQLAlchemy 2.0's default driver, is installed. DatabaseError for anything but
    SQLite and PostgreSQL."""
    try:
        u = make_url(url)
    except ArgumentError:
        raise DatabaseError(f"invalid database URL (expected e.g. {SUPPORTED})") from None
    backend, _, driver = u.drivername.partition("+")
    if backend == "postgres":
        backend = "postgresql"
    if backend not in ("sqlite", "postgresql"):
        raise DatabaseError(
            f"unsupported database {backend + '://'} in {redact(url)}: "
            f"orch stores results in SQLite or PostgreSQL ({SUPPORTED})"
        )
    if backend == "postgresql" and not driver:
        if importlib.util.find_spec("psycopg2") is None:
            driver = "psycopg"
    return u.set(drivername=backend + (f"+{driver}" if driver else ""))


def _check_sqlite_file(database: str | None, must_exist: bool, writable: bool) -> None:
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    path = os.path.abspath(database)
    folder = os.path.dirname(path)
    exists = os.path.exists(path)
    if must_exist and not exists:
        raise DatabaseError(
            f"no database file {path} (check --db; `orch submit` or `orch db upgrade` creates one)"
        )
    if not os.path.isdir(folder):
        return  # reported by _sqlite_engine
    if not writable:  # reading a WAL database needs its -shm file, or a folder to create it in
        if exists and not os.path.exists(path + "-shm") and not os.access(folder, os.W_OK):
            raise DatabaseError(
                f"cannot read database file {path}: its folder {folder} is read-only and "
                f"SQLite must create {os.path.basename(path)}-shm there (make the folder "
                f"writable, or copy the file elsewhere)"
            )
        return
    if exists and not os.access(path, os.W_OK):
        raise DatabaseError(f"database file {path} is read-only")
    if not os.access(folder, os.W_OK):
        if exists:
            raise DatabaseError(
                f"folder {folder} of database file {path} is read-only (SQLite writes its "
                f"-wal and -shm files there)"
            )
        raise DatabaseError(f"folder {folder} is read-only: cannot create database file {path}")


def _sqlite_engine(u, wal: bool = True) -> Engine:
    """`wal`: switch the file to WAL on connect; a reader (`wal` False) leaves the file as it
    is, so that reading an empty or foreign file writes nothing to it."""
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
        if wal:
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
