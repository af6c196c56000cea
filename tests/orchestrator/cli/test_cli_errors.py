"""Every bad input: one clear line on stderr, exit code 2, no rows written, no password shown."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select

from db.models import Base
from orchestrator.cli import main
from orchestrator.store import Store
from tests.orchestrator.orch_helpers import PG_PASSWORD, fake_config, orch

GOOD = """\
name: e
pairs: [{target: tiny-llama, draft: tiny-llama-draft}]
dataset: {name: spec_bench, prompts: 1}
methods:
"""
CASES = {
    "malformed yaml": ("name: e\npairs: [{target: tiny-llama\nmethods: [", "malformed YAML"),
    "unknown method": (GOOD + "  - name: warp_drive\n", "unknown method 'warp_drive'"),
    "unknown parameter": (GOOD + "  - {name: linear, grid: {kk: [1]}}\n", "unknown parameter 'kk'"),
    "wrong type": (
        GOOD + "  - {name: fixed_tree, grid: {depth: [2, deep]}}\n",
        "grid.depth[1]: expected an integer, got 'deep'",
    ),
    "empty grid": (GOOD + "  - {name: linear, grid: {k: []}}\n", "empty grid"),
    "unknown model": (
        GOOD.replace("tiny-llama-draft", "no-such-model") + "  - name: linear\n",
        "unknown model 'no-such-model'",
    ),
}


def _counts(url: str) -> dict[str, int]:
    store = Store(url)
    with store.Session() as s:
        out = {
            t.name: s.scalar(select(func.count()).select_from(t))
            for t in Base.metadata.sorted_tables
        }
    store.close()
    return out


@pytest.fixture
def populated(db_url):
    """A database that already holds one sweep, to check that nothing gets added."""
    store = Store(db_url)
    store.submit("existing", {"name": "existing"}, [fake_config(1), fake_config(2)], "v")
    store.close()
    return db_url


def _invoke(*args):
    r = CliRunner().invoke(main, list(args))
    return r


def _one_line_error(r, needle):
    assert r.exit_code == 2, r.output
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], r.stderr
    assert PG_PASSWORD not in r.output and "Traceback" not in r.output


@pytest.mark.parametrize("case", list(CASES))
def test_bad_sweep_files(case, populated, tmp_path):
    text, needle = CASES[case]
    spec = tmp_path / "bad.yaml"
    spec.write_text(text)
    before = _counts(populated)
    r = _invoke("submit", str(spec), "--db", populated, "--executor", "local")
    _one_line_error(r, needle)
    assert _counts(populated) == before


def test_bad_sweep_file_creates_no_database(tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text(CASES["unknown method"][0])
    r = _invoke("submit", str(spec), "--db", f"sqlite:///{tmp_path / 'new.db'}")
    _one_line_error(r, "unknown method")
    assert not (tmp_path / "new.db").exists()


def test_bad_verifier_pairing_names_file_and_compatible_verifiers(populated, tmp_path, monkeypatch):
    """DynaTree's deterministic trees with a verifier that needs sampled trees at T > 0: one
    line naming the file path and the verifiers that fit, before any model loads."""
    import engine.models

    def no_loading(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(engine.models, "load_pair", no_loading)
    spec = tmp_path / "pairing.yaml"
    spec.write_text(
        GOOD.replace("methods:", "sampling: {temperature: 0.8}\nmethods:")
        + "  - {name: dynatree, params: {verifier: specinfer}}\n"
    )
    before = _counts(populated)
    r = _invoke("submit", str(spec), "--db", populated, "--executor", "local")
    _one_line_error(
        r,
        f"{spec}: methods[0]: verifier 'specinfer' is not lossless for method "
        "'dynatree' at temperature 0.8 (its trees are deterministic); compatible "
        "verifiers: nss",
    )
    assert _counts(populated) == before


def test_metric_not_in_whitelist(populated):
    before = _counts(populated)
    _one_line_error(
        _invoke("query", "--best-by", "vibes", "--db", populated),
        "metric 'vibes' is not allowed for --best-by (allowed: throughput",
    )
    assert _counts(populated) == before


@pytest.mark.parametrize(
    "args, needle",
    [
        (["resume", "nope"], "no sweep named 'nope'"),
        (["cancel", "nope"], "no sweep named 'nope'"),
        (["status", "nope"], "no sweep named 'nope'"),
        (["query", "--best-by", "throughput"], "no finished trials"),
        (["compare", "--sweep", "existing"], "no finished trials of sweep 'existing'"),
    ],
)
def test_bad_requests(args, needle, populated):
    before = _counts(populated)
    _one_line_error(_invoke(*args, "--db", populated), needle)
    assert _counts(populated) == before


def test_unreachable_database_in_a_real_process(tmp_path):
    """Exit code, stderr and stdout of the actual `orch` process; the password stays hidden,
    also when it comes from ORCH_DB_URL."""
    spec = tmp_path / "ok.yaml"
    spec.write_text(GOOD + "  - name: linear\n")
    url = f"postgresql+psycopg://alice:{PG_PASSWORD}@127.0.0.1:1/lab"
    for args, env in [
        (["submit", str(spec), "--db", url], {}),
        (["status"], {"ORCH_DB_URL": url}),
        (["query", "--best-by", "throughput", "--db", url], {}),
    ]:
        r = orch(*args, env=env, timeout=120)
        assert r.returncode == 2, r.stderr
        assert r.stdout == ""
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            "error: cannot connect to database postgresql+psycopg://alice:***@"
        ), lines
        assert PG_PASSWORD not in r.stderr


def test_malformed_yaml_in_a_real_process(tmp_path, sqlite_url):
    spec = tmp_path / "bad.yaml"
    spec.write_text(CASES["malformed yaml"][0])
    r = orch("submit", str(spec), "--db", sqlite_url, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"error: {spec}: malformed YAML")
    assert not (tmp_path / "orch.db").exists()


def test_a_ray_that_cannot_start_is_one_line_and_the_sweep_stays_resumable(
    sqlite_url, tmp_path, monkeypatch
):
    """Ray failing to start (seen under load: "The current node timed out during startup")
    or to connect is not a traceback: one `error:` line, exit 2, the trials still pending."""
    import ray

    def fail(*args, **kwargs):
        raise Exception(
            "The current node timed out during startup. This could happen because some of "
            "the raylet failed to startup or the GCS has become overloaded.\nmore detail"
        )

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", fail)
    spec = tmp_path / "ok.yaml"
    spec.write_text(GOOD + "  - {name: linear, params: {k: 2}}\n")
    r = _invoke("submit", str(spec), "--db", sqlite_url, "--executor", "ray", "--no-progress")
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("error: could not start a local Ray: The current node timed out")
    assert "more detail" not in r.output and "`orch resume`" in last
    store = Store(sqlite_url)
    row = store.counts("e")[0]
    store.close()
    assert (row["pending"], row["done"], row["failed"]) == (1, 0, 0)
