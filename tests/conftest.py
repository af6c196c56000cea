import functools
import os
import uuid

import pytest
import torch
from hypothesis import settings

from tests.orchestrator.orch_helpers import PG_ADMIN, PG_PASSWORD

# `make test` (CI) runs the property tests on the same examples every time (HYPOTHESIS_PROFILE=ci:
# derived from each test's name), so a run fails only on a change; pytest run by hand draws new
# examples each time, which is how counterexamples get found.
settings.register_profile("ci", derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@functools.lru_cache(maxsize=None)
def _pair(family: str):
    from engine.models import load_pair

    return load_pair(f"tiny-{family}", f"tiny-{family}-draft")


@pytest.fixture(scope="session", params=["llama", "neox"])
def tiny_pair(request):
    """Both tiny families (target, draft derived from it), loaded once per session."""
    return _pair(request.param)


@pytest.fixture(scope="session")
def llama_pair():
    return _pair("llama")


@pytest.fixture
def traced_graphs(monkeypatch):
    """`engine: graphs` captures on the CPU recorded with make_fx and replayed from the record
    (engine/runtime/cuda_graphs.py TRACE_ON_CPU): a graphed function that reads a host value, or
    depends on one, fails as it would in a CUDA graph."""
    from engine.runtime import cuda_graphs

    monkeypatch.setattr(cuda_graphs, "TRACE_ON_CPU", True)


@pytest.fixture(scope="session", autouse=True)
def one_thread():
    """Every test runs with one torch thread: on tiny models and small tensors torch's thread
    pool only adds overhead, up to 10x on a loaded 2-core machine. The real-pair test
    (test_real_golden.py) takes all cores back for itself with `all_threads`."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield before
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def all_threads(one_thread):
    torch.set_num_threads(one_thread)
    yield
    torch.set_num_threads(1)


# ---- databases: a SQLite file, a fresh Postgres database per session ----------------------


def _pg_admin():
    try:
        import psycopg

        return psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=3)
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"PostgreSQL at {PG_ADMIN.split('@')[-1]} is unreachable ({type(e).__name__})")


@pytest.fixture(scope="session")
def pg_server_url():
    """A fresh database on the real server for this test session, dropped afterwards."""
    from sqlalchemy.engine import make_url

    admin = _pg_admin()
    name = f"orch_test_{uuid.uuid4().hex[:10]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    # The server trusts local connections, so a password is not needed; one is put in the URL
    # anyway so that every Postgres test also checks that it never shows up in output.
    u = make_url(PG_ADMIN)
    url = u.set(drivername="postgresql+psycopg", password=u.password or PG_PASSWORD, database=name)
    yield url.render_as_string(hide_password=False)
    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.close()


@pytest.fixture
def pg_url(pg_server_url):
    """A clean schema for one test (a new database per test is slow: reset the tables)."""
    import sqlalchemy as sa

    engine = sa.create_engine(pg_server_url)
    with engine.begin() as c:
        c.execute(sa.text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
    engine.dispose()
    return pg_server_url


@pytest.fixture
def sqlite_url(tmp_path):
    return f"sqlite:///{tmp_path / 'orch.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'orch.db'}"
    return request.getfixturevalue("pg_url")


def pytest_collection_modifyitems(items):
    """Tests that use the Postgres server carry the `postgres` marker (-m 'not postgres')."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "pg_url" in item.fixturenames or "postgres" in params.values():
            item.add_marker(pytest.mark.postgres)
