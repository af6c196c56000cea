"""bench/methods.py on the tiny pair: every method, interleaved per prompt in a shuffled
order, reproduces the autoregressive tokens; the JSON has one complete row per method; a run
stopped early resumes from its next prompt; bad input fails before any model loads."""

import json

import pytest

from bench import methods
from engine.drafters import DRAFTERS

SMALL = [
    "--max-new-tokens",
    "12",
    "--prompt-tokens",
    "24",
    "--param",
    "dynatree.N_max=16",
    "--param",
    "ddtree.B=16",
]


def test_bench_methods_tiny_stops_and_resumes(tmp_path, capsys):
    out = tmp_path / "m.json"
    methods.main(["--n-prompts", "2", *SMALL, "--out", str(out), "--stop-after-s", "1e-9"])
    first = json.loads(out.read_text())
    assert first["n_prompts"] == 1  # stopped after the prompt that crossed the limit
    methods.main(["--n-prompts", "2", *SMALL, "--out", str(out), "--resume"])
    report = json.loads(out.read_text())
    assert report["n_prompts"] == 2 and report["per_prompt"][0] == first["per_prompt"][0]
    assert [sorted(p["order"]) for p in report["per_prompt"]] == [sorted(DRAFTERS)] * 2
    rows = {r["method"]: r for r in report["rows"]}
    assert set(rows) == set(DRAFTERS)
    ar = rows["autoregressive"]
    assert ar["speedup"] == pytest.approx(1.0) and ar["speedup_gmean"] == pytest.approx(1.0)
    assert ar["tokens_per_iteration"] == 1.0
    for r in rows.values():
        assert r["matches_ar"] is True, r["method"]
        assert r["prompts"] == 2 and r["new_tokens"] == ar["new_tokens"]
        assert 1.0 <= r["tokens_per_iteration"] <= r["mean_tree_size"]
        assert 0.0 <= r["acceptance_rate"] <= 1.0
    assert 1.0 < rows["linear"]["mean_tree_size"] <= 5.0  # root + k=4 (fewer at the end)
    printed = capsys.readouterr()
    assert "| dynatree |" in printed.out
    assert "prompt 1/2 (" in printed.err and "prompt 2/2 (" in printed.err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--methods", "nosuch"], "unknown method 'nosuch'"),
        (["--param", "linear.nosuch=1"], "nosuch"),
        (["--methods", "linear", "--param", "salf.N=4"], "not among the methods"),
        (["--dataset", "nosuch"], "nosuch"),
        (["--resume", "--out", "/nonexistent.json"], "--resume needs an existing --out"),
    ],
)
def test_bench_methods_bad_input_fails_before_loading(monkeypatch, capsys, argv, message):
    monkeypatch.setattr(methods, "load_pair", lambda *a: pytest.fail("loaded a model"))
    with pytest.raises(SystemExit) as e:
        methods.main(argv)
    assert message in str(e.value) and str(e.value).startswith("error: ")


def test_bench_methods_resume_with_other_settings_fails(tmp_path, monkeypatch):
    out = tmp_path / "m.json"
    methods.main(["--n-prompts", "1", "--methods", "linear", *SMALL[:4], "--out", str(out)])
    monkeypatch.setattr(methods, "load_pair", lambda *a: pytest.fail("loaded a model"))
    differ = "other settings \\(prompt_tokens, max_new_tokens, methods\\)"
    with pytest.raises(SystemExit, match=differ):
        methods.main(
            [
                "--n-prompts",
                "1",
                "--methods",
                "linear",
                "--param",
                "linear.k=2",
                "--max-new-tokens",
                "8",
                "--out",
                str(out),
                "--resume",
            ]
        )


def test_bench_methods_labels_engine_and_hf_lookup_sizes(tmp_path):
    """LABEL=METHOD runs one method under two settings, --engine reaches every method, and each
    --hf-lookup size is its own HF contender; every output equals autoregressive decoding."""
    out = tmp_path / "m.json"
    argv = ["--n-prompts", "1", *SMALL[:4], "--out", str(out), "--draft", "none"]
    argv += ["--methods", "lookup,lk2=lookup", "--param", "lk2.k=2", "--engine", "fast"]
    methods.main([*argv, "--hf-lookup", "2,3"])
    report = json.loads(out.read_text())
    assert report["engine"] == "fast"
    assert report["methods"]["lk2"]["method"] == "lookup" and report["methods"]["lk2"]["k"] == 2
    assert report["methods"]["lookup"]["k"] == 10
    rows = {r["method"]: r for r in report["rows"]}
    names = ["autoregressive", "lookup", "lk2", "hf_greedy", "hf_prompt_lookup_k2"]
    assert list(rows) == [*names, "hf_prompt_lookup_k3"]
    assert all(r["matches_ar"] for r in rows.values())
    assert rows["lk2"]["mean_tree_size"] <= 3.0  # root + at most k=2 drafts


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--methods", "a=linear,a=lookup"], "names 'a' twice"),
        (["--methods", "autoregressive=linear"], "names 'autoregressive' twice"),
        (["--engine", "turbo"], "--engine 'turbo'"),
        (["--hf-lookup", "2,x"], "--hf-lookup takes integers"),
        (["--hf-lookup", "0"], "must be >= 1"),
    ],
)
def test_bench_methods_label_and_size_errors(monkeypatch, argv, message):
    monkeypatch.setattr(methods, "load_pair", lambda *a: pytest.fail("loaded a model"))
    with pytest.raises(SystemExit, match=message):
        methods.main(argv)
