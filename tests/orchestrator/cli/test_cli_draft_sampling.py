"""`orch generate --draft-temperature / --draft-top-p`: the draft's own sampling settings."""

import json

from click.testing import CliRunner

from orchestrator.cli import main

TINY = ["--target", "tiny-llama", "--draft", "tiny-llama-draft"]


def run(*args):
    return CliRunner().invoke(main, ["generate", *TINY, "--prompt", "Hello", *args])


def test_greedy_target_with_a_sampling_draft():
    args = ["--method", "iid", "--param", "K=3", "--param", "L=3", "--max-new-tokens", "16"]
    plain = run(*args, "--json")
    drafted = run(*args, "--draft-temperature", "0.6", "--draft-top-p", "0.9", "--json")
    assert plain.exit_code == 0 and drafted.exit_code == 0, drafted.output
    a, b = json.loads(plain.stdout), json.loads(drafted.stdout)
    assert a["tokens"] == b["tokens"] and b["params"]["verifier"] == "greedy"
    # a greedy draft's i.i.d. rollouts coincide (a path); a sampling draft's branch
    assert max(a["stats"]["per_iteration"]["tree_size"]) <= 4
    assert max(b["stats"]["per_iteration"]["tree_size"]) > 4


def test_a_verifier_that_cannot_take_the_drafts_trees_is_one_line():
    r = run(
        "--method",
        "dyspec",
        "--param",
        "verifier=specinfer",
        "--temperature",
        "0.6",
        "--draft-temperature",
        "0",
    )
    assert r.exit_code == 2
    assert "with a draft at temperature 0" in r.output and "Traceback" not in r.output
    bad = run("--draft-top-p", "1.5")
    assert bad.exit_code == 2 and "--draft-top-p" in bad.output
