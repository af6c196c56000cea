"""Every bad input of tests/reliability/cases.py (run by tests/reliability/harness.py): one line
`error: ...` on stderr, its exit code, no traceback, and the database unchanged (row counts of
every table; no new database file), on SQLite and, where the case touches the database, on the
real Postgres server."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch

from tests.orchestrator.orch_helpers import PG_PASSWORD
from tests.reliability.cases import CASES
from tests.reliability.harness import classify, cleanup, counts, run, setup

PARAMS = [pytest.param(c, b, id=f"{c.id}-{b}") for c in CASES for b in c.backends]


@pytest.fixture
def work():
    """A folder of its own per case (its permissions change)."""
    d = Path(tempfile.mkdtemp(prefix="orch-rel-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    cleanup(d)


def _skip(case) -> None:
    if case.needs == "no-cuda" and torch.cuda.is_available():
        pytest.skip("CUDA is available here")


@pytest.mark.parametrize("case, backend", PARAMS)
def test_bad_input(case, backend, work, request, monkeypatch):
    _skip(case)
    url = f"sqlite:///{work / 'lab.db'}"
    if backend == "postgres":
        url = request.getfixturevalue("pg_url")
    monkeypatch.chdir(work)  # a default sqlite:///orch.db would land here, and be noticed
    monkeypatch.delenv("ORCH_DB_URL", raising=False)
    monkeypatch.delenv("ORCH_DB_URL_FILE", raising=False)
    ctx = setup(case, work, url, monkeypatch)
    before = counts(url) if case.db != "missing" else None
    out = run(case, ctx)
    after = counts(url) if case.db != "missing" else None
    verdict = classify(case, ctx, out, before, after)
    shown = f"exit {out.code} in {out.seconds:.1f}s\nstdout: {out.stdout}\nstderr: {out.stderr}"
    assert verdict == "clean", f"{verdict}: {shown}"
    assert PG_PASSWORD not in out.stdout + out.stderr
    if case.writes:
        assert after["trials"] == before["trials"] + 1 and after["results"] == before["results"]
    else:
        assert out.stdout == ""


def test_table_covers_the_issue():
    """The cases the issue lists are all in the table (ids are unique)."""
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    for needed in (
        "temperature-nan",
        "temperature-negative",
        "top-p-zero",
        "top-p-above-one",
        "sweep-not-utf8",
        "dataset-not-utf8",
        "duplicate-top-level-key",
        "prompt-ids-out-of-range",
        "generate-device-bogus",
        "generate-device-cuda-without-cuda",
        "seed-above-64-bit",
        "branch-above-vocabulary",
        "top-k-above-vocabulary",
        "model-config-not-json",
        "model-folder-unreadable",
        "export-missing-folder",
        "export-unwritable-folder",
        "plot-unwritable-folder",
        "schema-newer-than-code",
        "read-only-sqlite-file",
        "read-only-sqlite-folder",
        "sweep-name-too-long",
        "sweep-name-escape-sequence",
        "ray-address-refused",
        "status-missing-sqlite-file",
        "query-missing-sqlite-file",
        "compare-missing-sqlite-file",
        "accelerator-gpu-without-gpus",
        "every-trial-failed",
        "grid-of-ten-million",
        "dyspec-budget-1e8",
        "generate-max-new-tokens-huge",
        "prompts-above-cap",
    ):
        assert needed in ids
