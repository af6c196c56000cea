"""`orch generate`: JSON output, and one-line errors with exit code 2 before any model loads."""

import json

import pytest
from click.testing import CliRunner

from orchestrator.cli import main


def run(args):
    return CliRunner().invoke(main, args)


def test_generate_json_has_tokens_text_and_stats():
    r = run(
        [
            "generate",
            "--method",
            "linear",
            "--param",
            "k=4",
            "--prompt",
            "Hello",
            "--max-new-tokens",
            "12",
            "--json",
        ]
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert len(out["tokens"]) == 12 and isinstance(out["text"], str)
    assert out["params"] == {"k": 4, "verifier": "greedy"}
    stats = out["stats"]
    assert stats["new_tokens"] == 12
    assert 0.0 <= stats["acceptance_rate"] <= 1.0
    assert stats["tokens_per_iteration"] >= 1.0
    assert len(stats["per_iteration"]["accepted"]) == stats["iterations"]
    ar = json.loads(
        run(
            [
                "generate",
                "--method",
                "autoregressive",
                "--prompt",
                "Hello",
                "--max-new-tokens",
                "12",
                "--json",
            ]
        ).stdout
    )
    assert ar["tokens"] == out["tokens"]


def test_prompt_ids_and_plain_output():
    r = run(
        [
            "generate",
            "--method",
            "fixed_tree",
            "--param",
            "depth=3",
            "--prompt-ids",
            "256,72,105",
            "--max-new-tokens",
            "5",
        ]
    )
    assert r.exit_code == 0, r.output
    assert "[fixed_tree] 5 tokens" in r.stderr


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--method", "nope"], "unknown method 'nope'"),
        (["--method", "linear", "--param", "kk=3"], "unknown parameter 'kk'"),
        (["--method", "linear", "--param", "k=abc"], "expected an integer"),
        (["--method", "linear", "--param", "k=0"], "k must be >= 1"),
        (["--method", "linear", "--param", "k"], "key=value"),
        (["--method", "linear", "--param", "verifier=magic"], "unknown verifier"),
        (["--temperature", "0.7", "--param", "verifier=greedy"], "not lossless for method"),
        (["--target", "no-such-model"], "unknown model 'no-such-model'"),
        (["--max-new-tokens", "0"], "--max-new-tokens"),
        (["--prompt-ids", "1,x"], "comma-separated integers"),
        (
            ["--target", "tiny-neox", "--draft", "tiny-neox-draft", "--engine", "fast+lean"],
            "engine +lean: the model is not supported: its family is 'gpt_neox'",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(args, needle, monkeypatch):
    import engine.models

    def no_load(*a, **k):
        raise AssertionError("a model was loaded despite bad input")

    monkeypatch.setattr(engine.models, "load_pair", no_load)
    if "--prompt-ids" not in args:
        args = args + ["--prompt", "hi"]
    r = run(["generate"] + args)
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], r.stderr
    assert "Traceback" not in r.output


def test_both_or_no_prompt_is_an_error():
    for args in [[], ["--prompt", "a", "--prompt-ids", "1"]]:
        r = run(["generate"] + args)
        assert r.exit_code == 2 and "exactly one of --prompt" in r.stderr


def test_generate_lookup_without_a_draft_model():
    """`--draft none` runs a model-free method (no draft model loaded) with the same tokens;
    a method that needs the draft is refused before loading."""
    prompt = "abc abc abc abc abc"
    args = ["generate", "--prompt", prompt, "--max-new-tokens", "16", "--json"]
    ar = json.loads(run(args + ["--method", "autoregressive"]).stdout)
    r = run(args + ["--method", "lookup", "--draft", "none", "--param", "min_ngram=1"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["tokens"] == ar["tokens"]
    assert sum(out["stats"]["per_iteration"]["draft_forwards"]) == 0
    r = run(args + ["--method", "linear", "--draft", "none"])
    assert r.exit_code == 2 and "runs a draft model" in r.output
