"""`orch submit --only KEY=V1[,V2...]` (orchestrator/only.py): the sweep is stored whole, only
the matching trials run, the others stay pending until `orch resume`; bad filters fail with
one line before anything is written. Tiny pair, local executor, SQLite."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from engine.config import ConfigError
from orchestrator.cli import main
from orchestrator.only import check_only, matches, parse_only, value_matches
from orchestrator.store import Store
from tests.orchestrator.orch_helpers import fake_config, sweep_24


def _cli(*args):
    return CliRunner().invoke(main, list(args))


def _by_status(url: str, sweep: str) -> dict[str, list[dict]]:
    store = Store(url, mode="read")
    try:
        sweep_id = store.sweep(sweep)["id"]
        out: dict[str, list[dict]] = {}
        for c in store.configs(sweep_id):
            out.setdefault("all", []).append(c)
        from db.models import Trial

        with store.Session() as s:
            for cfg, status in s.query(Trial.config, Trial.status):
                out.setdefault(str(status.value), []).append(cfg)
        return out
    finally:
        store.close()


def test_only_runs_the_matching_trials_and_resume_runs_the_rest(tmp_path):
    sweep = sweep_24(tmp_path / "s.yaml")
    url = f"sqlite:///{tmp_path / 'o.db'}"
    r = _cli("submit", str(sweep), "--db", url, "--executor", "local", "--no-progress",
             "--only", "method=linear", "--only", "k=1,3")  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "ran 4 (4 done" in r.output and "20 trials still pending" in r.output
    rows = _by_status(url, "tiny24")
    assert len(rows["all"]) == 24  # stored whole
    done = rows["done"]
    assert sorted((c["target"], c["params"]["k"]) for c in done) == [
        ("tiny-llama", 1),
        ("tiny-llama", 3),
        ("tiny-neox", 1),
        ("tiny-neox", 3),
    ]
    assert all(c["method"] == "linear" for c in done)
    assert len(rows["pending"]) == 20

    status = _cli("status", "tiny24", "--db", url)
    assert "4 of 24 trials done, 20 pending" in status.output
    out = tmp_path / "rep"
    rep = _cli("report", "tiny24", "--db", url, "-o", str(out))
    assert rep.exit_code == 0, rep.output
    assert "4 of 24 trials done, 20 pending" in (out / "report.md").read_text()

    # a second cut adds to the first; the done ones are not run again
    r = _cli("submit", str(sweep), "--db", url, "--executor", "local", "--no-progress",
             "--only", "method=autoregressive", "--only", "target=tiny-neox")  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "ran 1 (1 done" in r.output and "19 trials still pending" in r.output

    r = _cli("resume", "tiny24", "--db", url, "--executor", "local", "--no-progress")
    assert r.exit_code == 0, r.output
    assert "ran 19 (19 done" in r.output and "status finished" in r.output
    assert "still pending" not in r.output
    rows = _by_status(url, "tiny24")
    assert len(rows["done"]) == 24 and "pending" not in rows
    status = _cli("status", "tiny24", "--db", url)
    assert "24 of 24 trials done." in status.output


@pytest.mark.parametrize(
    "only, message",
    [
        (["depthh=3"], "no trial of sweep 'tiny24' has 'depthh'; keys: branch, budget"),
        (["k=9"], "no trial of sweep 'tiny24' has k=9; its values: 1, 2, 3, 4, 5"),
        (["method=linear,dynatree"], "has method=dynatree; its values: autoregressive"),
        (["temperature=0.5"], "has temperature=0.5"),
        (["method=autoregressive", "k=1"], "no trial of sweep 'tiny24' matches them all"),
        (["k"], "--only expects KEY=V1[,V2...], got 'k'"),
        (["k=1,"], "--only expects KEY=V1[,V2...], got 'k=1,'"),
        (["k=1", "k=2"], "--only k given twice"),
    ],
)
def test_bad_only_fails_with_one_line_and_writes_nothing(tmp_path, only, message):
    sweep = sweep_24(tmp_path / "s.yaml")
    db = tmp_path / "o.db"
    args = ["submit", str(sweep), "--db", f"sqlite:///{db}", "--executor", "local"]
    for o in only:
        args += ["--only", o]
    r = _cli(*args)
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.output
    assert message in lines[0]
    assert not db.exists()  # checked before the database is opened


def test_bad_only_on_resume_fails_before_running(tmp_path):
    sweep = sweep_24(tmp_path / "s.yaml")
    url = f"sqlite:///{tmp_path / 'o.db'}"
    r = _cli("submit", str(sweep), "--db", url, "--executor", "local", "--no-progress",
             "--only", "k=2")  # fmt: skip
    assert r.exit_code == 0, r.output
    r = _cli("resume", "tiny24", "--db", url, "--executor", "local", "--only", "k=7")
    assert r.exit_code == 2
    assert r.output.strip().splitlines()[-1].startswith("error: --only k=7: no trial")
    assert len(_by_status(url, "tiny24")["pending"]) == 22  # nothing ran
    r = _cli("resume", "tiny24", "--db", url, "--executor", "local", "--no-progress",
             "--only", "depth=2")  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "ran 4 (4 done" in r.output  # fixed_tree depth 2 x branch 1, 2 x 2 pairs


def test_values_compare_by_meaning():
    assert value_matches(0.6, "0.60") and value_matches(0, "0.0") and not value_matches(0.6, "x")
    assert value_matches(True, "true") and not value_matches(True, "1")
    assert value_matches(None, "none") and not value_matches(None, "0")
    assert value_matches([2, 1, 1], "[2, 1, 1]") and not value_matches([2, 1], "[2,1,1]")
    assert value_matches("traversal", "traversal") and not value_matches("traversal", "Traversal")
    (o,) = parse_only(["expansion=[2,1,1],[4,1,1]"])
    assert o.values == ("[2,1,1]", "[4,1,1]")


def test_matching_is_every_filter_and_profile_trials_follow_the_pair():
    from dataclasses import replace

    from orchestrator.records import PROFILE

    a = fake_config(1)
    b = fake_config(2, target="tiny-neox", draft="tiny-neox-draft")
    ar = fake_config(method="autoregressive")
    only = parse_only(["method=linear", "k=2"])
    assert [matches(c, only) for c in (a, b, ar)] == [False, True, False]
    assert check_only(only, [a, b, ar], "s") == 1
    prof = replace(ar, method=PROFILE, params={})
    assert matches(prof, only)  # a pair measurement: method filters do not leave it out
    assert not matches(prof, parse_only(["target=tiny-neox"]))
    with pytest.raises(ConfigError, match="has 'k'"):
        check_only(parse_only(["k=1"]), [ar, prof], "s")
    assert json.dumps([o.shown() for o in only]) == '["method=linear", "k=2"]'


def test_draft_settings_select_a_methods_own_sampling():
    """DDTree's sweep runs two chains at T = 1; `draft_temperature` picks vanilla DFlash's
    (the argmax block), `none` the one whose draft samples as the target does."""
    from dataclasses import replace

    sps = replace(fake_config(1), temperature=1.0)
    dflash = replace(sps, draft_temperature=0.0)
    trials = [sps, dflash]
    assert [matches(c, parse_only(["draft_temperature=0"])) for c in trials] == [False, True]
    assert [matches(c, parse_only(["draft_temperature=none"])) for c in trials] == [True, False]
    with pytest.raises(ConfigError, match=r"has draft_top_p=0.9; its values: None"):
        check_only(parse_only(["draft_top_p=0.9"]), trials, "s")


def test_dynatree_grid_names_select_the_parameters_they_set():
    """DynaTree's grid is written depth / branch / threshold (App. B); its config resolves them
    into D0 / B_mid / tau, and --only reads them there."""
    from dataclasses import replace

    grid = fake_config(
        method="dynatree", D0=8, B_mid=3, tau=0.03, depth=None, branch=None, threshold=None
    )
    other = replace(grid, params={**grid.params, "D0": 5})
    only = parse_only(["depth=8", "branch=3", "threshold=0.03"])
    assert [matches(c, only) for c in (grid, other)] == [True, False]
    with pytest.raises(ConfigError, match=r"has depth=9; its values: 5, 8"):
        check_only(parse_only(["depth=9"]), [grid, other], "s")


def test_a_jobs_api_driver_gets_every_only():
    from orchestrator.run.jobs import driver_command

    cmd = driver_command("s.yaml", {"scale": True, "only": ("method=linear", "k=1,2")})
    assert cmd.endswith("--scale --only method=linear --only k=1,2")
