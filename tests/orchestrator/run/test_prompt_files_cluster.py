"""A sweep on a lab's own prompt files, a JSONL and a Parquet file, run on a real multi-node Ray
cluster on this machine (tests/orchestrator/run/ray_nodes.py: a head and two worker nodes)
whose workers do not have the files: the driver reads and checks them when it parses the
sweep, ships the selected prompts with the trials, and is held at its first claim (the
ORCH_TEST_PAUSE hook) while the test deletes both files, so every trial runs after they are
gone. Each trial ran on a worker node, on the prompts the stratified selection names, and the
sweep stores each file's sha256."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
import time

import pytest

from orchestrator.run.runner import PAUSE_ENV
from tests.orchestrator.orch_helpers import REPO

pytestmark = pytest.mark.slow
pytest.importorskip("ray")
pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

ROWS = [
    {"id": f"r{i}", "topic": ("poetry", "math", "code")[i % 3], "q": f"Question {i}: why {i}?"}
    for i in range(9)
]
SWEEP = """\
name: own-prompts
pairs: [{target: tiny-llama, draft: tiny-llama-draft}]
dataset:
  - {path: own.jsonl, field: q, category_field: topic, id_field: id, prompts: 4, prompt_tokens: 24}
  - {path: own.parquet, field: q, prompts: 3}
max_new_tokens: 6
device: cpu
certify: false
methods: [{name: autoregressive}, {name: linear, params: {k: 2}}]
"""


@pytest.fixture(scope="module")
def cluster():
    from tests.orchestrator.run.ray_nodes import ray_cluster

    with ray_cluster(workers=2, gpus=1) as c:
        yield c


def test_prompt_files_reach_workers_that_do_not_have_them(cluster, tmp_path):
    from tests.orchestrator.run.ray_nodes import worker_nodes

    jsonl, parquet = tmp_path / "own.jsonl", tmp_path / "own.parquet"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    pd.DataFrame(ROWS[::-1]).to_parquet(parquet)
    sha = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (jsonl, parquet)}
    spec, db, pause = tmp_path / "own.yaml", tmp_path / "own.db", tmp_path / "pause"
    spec.write_text(SWEEP)
    env = {k: v for k, v in cluster["env"].items() if k != "ORCH_DATA_DIR"}
    env.update({"PYTHONPATH": str(REPO), PAUSE_ENV: f"1:{pause}"})
    args = ["submit", str(spec), "--db", f"sqlite:///{db}", "--address", cluster["address"]]
    driver = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", *args, "--actors", "2"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 400
        while not pause.exists():  # the driver holds its first claim: prompts read, none run
            assert driver.poll() is None, driver.communicate()[0]
            assert time.monotonic() < deadline, "the driver never claimed a trial"
            time.sleep(0.2)
        jsonl.unlink(), parquet.unlink()  # from here on no machine has the files
        pause.unlink()
        out, _ = driver.communicate(timeout=600)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 0, out
    con = sqlite3.connect(db)
    rows = con.execute(
        "select t.dataset, t.method, t.worker_node, t.status, r.per_prompt "
        "from trials t join results r on r.trial_id = t.id"
    ).fetchall()
    assert len(rows) == 4 and {r[3] for r in rows} == {"done"}
    assert {r[2] for r in rows} <= worker_nodes(cluster)  # ran on worker nodes, not the head
    jl, pq = f"own@{sha['own.jsonl'][:12]}", f"own@{sha['own.parquet'][:12]}"
    ids = {(d, m): [p["id"] for p in json.loads(pp)] for d, m, _, _, pp in rows}
    # the JSONL file: stratified over its topics (poetry, math, code, poetry)
    assert ids[jl, "linear"] == ids[jl, "autoregressive"] == ["r0", "r1", "r2", "r3"]
    # the Parquet file: no category field, so file order; ids are row numbers
    assert ids[pq, "linear"] == ids[pq, "autoregressive"] == ["1", "2", "3"]
    stored = json.loads(con.execute("select spec from sweeps").fetchone()[0])
    assert {d["path"].rsplit("/", 1)[1]: d["sha256"] for d in stored["datasets"]} == sha
    names = {d["name"] for d in stored["datasets"]}
    assert names == {jl, pq}
    tokens = {}
    for d, m, _, _, pp in rows:
        tokens[d, m] = [p["tokens"] for p in json.loads(pp)]
    for d in names:
        assert tokens[d, "linear"] == tokens[d, "autoregressive"]  # greedy-exact on their prompts
