"""Issue 20, part B: database URLs as users write them (postgres://, +psycopg, unsupported
schemes as one line), split from test_terminal.py."""

from __future__ import annotations

import importlib.util

import pytest
from click.testing import CliRunner

from db import DatabaseError
from db.session import normalize_url
from orchestrator.cli import main
from orchestrator.store import Store

# ---- database URLs ---------------------------------------------------------------------


def _without_psycopg2(monkeypatch, present: bool = False):
    real = importlib.util.find_spec

    def find_spec(name, *a, **kw):
        if name == "psycopg2":
            return object() if present else None
        return real(name, *a, **kw)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


@pytest.mark.parametrize(
    "url, driver",
    [
        ("postgres://u@h:5432/db", "postgresql+psycopg"),
        ("postgresql://u@h/db", "postgresql+psycopg"),
        ("postgresql+psycopg://u@h/db", "postgresql+psycopg"),
        ("postgresql+psycopg2://u@h/db", "postgresql+psycopg2"),
        ("postgres+psycopg://u@h/db", "postgresql+psycopg"),
        ("sqlite:///x.db", "sqlite"),
    ],
)
def test_postgres_urls_as_users_write_them(monkeypatch, url, driver):
    _without_psycopg2(monkeypatch)
    assert normalize_url(url).drivername == driver


def test_postgresql_url_keeps_the_default_driver_where_psycopg2_is_installed(monkeypatch):
    _without_psycopg2(monkeypatch, present=True)
    assert normalize_url("postgres://u@h/db").drivername == "postgresql"


@pytest.mark.parametrize("url", ["mysql://u:Secret1@h/db", "mysql+pymysql://u@h/db", "oracle://"])
def test_unsupported_schemes_are_one_line_naming_what_works(url):
    with pytest.raises(DatabaseError) as e:
        normalize_url(url)
    msg = str(e.value)
    assert "unsupported database" in msg and "SQLite or PostgreSQL" in msg, msg
    assert "pip install" not in msg and "\n" not in msg and "Secret1" not in msg


def test_cli_refuses_mysql_with_one_line(tmp_path):
    r = CliRunner().invoke(main, ["status", "--db", "mysql://u@h/db"])
    assert r.exit_code == 2
    assert r.stderr.strip().splitlines() == [
        "error: unsupported database mysql:// in mysql://u@h/db: orch stores results in "
        "SQLite or PostgreSQL (sqlite:///PATH or postgresql://user@host:5432/db)"
    ]


@pytest.mark.postgres
@pytest.mark.parametrize("scheme", ["postgres", "postgresql"])
def test_heroku_style_url_reaches_the_real_server(pg_url, scheme):
    url = scheme + "://" + pg_url.split("://", 1)[1]
    store = Store(url)
    try:
        assert store.dialect == "postgresql"
        store.submit("s", {"name": "s"}, [], "v")
        assert store.sweep("s")["name"] == "s"
    finally:
        store.close()
