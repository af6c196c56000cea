"""16 concurrent writer processes on SQLite and 32 on Postgres: no errors, no lost rows, one
result per config hash, every shared trial claimed exactly once."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from sqlalchemy import func, select

from db.models import Result, Sweep, SweepTrial, Trial
from orchestrator.store import Store
from tests.orchestrator.orch_helpers import HELPERS, PG_PASSWORD, REPO
from tests.orchestrator.writer_proc import OWN, SHARED


@pytest.mark.parametrize("backend, writers", [("sqlite", 16), ("postgres", 32)])
def test_concurrent_writers(backend, writers, tmp_path, request):
    url = (
        f"sqlite:///{tmp_path / 'orch.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("pg_url")
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(HELPERS)])}
    procs = [
        subprocess.Popen(
            [sys.executable, str(HELPERS / "writer_proc.py"), url, str(i)],
            env=env,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(writers)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0 and err == "", err[-2000:]
        assert PG_PASSWORD not in out + err
    assert sum(int(out) for out, _ in outs) == SHARED  # each shared trial claimed once
    store = Store(url)
    with store.Session() as s:
        n_trials = s.scalar(select(func.count()).select_from(Trial))
        n_results = s.scalar(select(func.count()).select_from(Result))
        n_hashes = s.scalar(select(func.count(func.distinct(Result.config_hash))))
        n_sweeps = s.scalar(select(func.count()).select_from(Sweep))
        links = s.scalar(select(func.count()).select_from(SweepTrial))
        not_done = s.scalar(select(func.count()).select_from(Trial).where(Trial.status != "done"))
        dup = s.scalar(select(func.count()).select_from(Result).where(Result.throughput < 0))
    store.close()
    expected = SHARED + writers * OWN
    assert (n_trials, n_results, n_hashes) == (expected, expected, expected)
    assert (n_sweeps, links, not_done, dup) == (writers + 1, expected, 0, 0)
