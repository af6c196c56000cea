"""`orch tag` and `orch note` (migration 0012) on SQLite and Postgres: tags added and taken
off, a note set, printed and cleared, neither changing which sweep is the most recent, bad
input in one line, and both shown by orch ui's sweeps answer."""

from __future__ import annotations

from click.testing import CliRunner

from orchestrator.cli import main
from tests.orchestrator.orch_helpers import fake_config, fake_result, record_sweep


def _run(*args):
    return CliRunner().invoke(main, list(args))


def test_tags_and_notes(db_url):
    from orchestrator.results import resolve_sweep
    from orchestrator.store import Store
    from orchestrator.ui.overview import sweeps
    from orchestrator.ui.reader import Reader

    store = Store(db_url)
    for name, i in (("older", 1), ("newer", 2)):
        record_sweep(store, name, [(fake_config(i), fake_result(fake_config(i)))])
    assert resolve_sweep(store) == "newer"
    r = _run("tag", "older", "h100", "paper-fig3", "h100", "--db", db_url)
    assert r.exit_code == 0, r.output
    assert r.output.strip() == "sweep 'older': tags h100, paper-fig3"
    r = _run("tag", "older", "v2", "-r", "h100", "--db", db_url)
    assert r.output.strip() == "sweep 'older': tags paper-fig3, v2"
    assert _run("note", "older", "rerun after the driver fix", "--db", db_url).exit_code == 0
    assert _run("note", "older", "--db", db_url).output.strip() == "rerun after the driver fix"
    assert resolve_sweep(store) == "newer"  # annotations do not make a sweep the most recent
    reader = Reader(db_url)
    listed = {s["name"]: s for s in sweeps(reader)["sweeps"]}
    assert listed["older"]["tags"] == ["paper-fig3", "v2"]
    assert listed["older"]["note"] == "rerun after the driver fix"
    assert listed["newer"]["tags"] == [] and listed["newer"]["note"] == ""
    assert _run("note", "older", "--clear", "--db", db_url).exit_code == 0
    assert _run("note", "older", "--db", db_url).output.strip() == "(no note)"
    assert sweeps(reader)["sweeps"][1]["note"] == ""  # read fresh, not from the cache
    reader.close()
    bad = _run("tag", "older", "two words", "--db", db_url)
    assert bad.exit_code == 2 and bad.output.count("\n") == 1 and "is not one word" in bad.output
    missing = _run("tag", "nope", "x", "--db", db_url)
    assert missing.exit_code == 2 and "no sweep named 'nope'" in missing.output
    both = _run("note", "older", "text", "--clear", "--db", db_url)
    assert both.exit_code == 2 and "not both" in both.output
    store.close()
