"""The sweep file: strict parsing, type checks against the method configs, expansion, hashes."""

from __future__ import annotations

from collections import Counter

import pytest

from orchestrator.records import TrialConfig
from orchestrator.spec import load_sweep
from orchestrator.spec.values import SpecError
from tests.orchestrator.orch_helpers import REPO, sweep_24

EXAMPLES = REPO / "examples"


def test_dynatree_450_expands_to_450_per_pair_and_repeat():
    sweep, trials = load_sweep(EXAMPLES / "dynatree_450.yaml")
    per = Counter((t.method, t.target, t.draft, t.repeat) for t in trials)
    pair = ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b")
    for r in range(sweep.repeats):
        assert per[("dynatree", *pair, r)] == 450 + 8  # the grid and Table 3's ablation
        assert per[("autoregressive", *pair, r)] == 6  # one baseline per max_new_tokens
    assert len(trials) == sweep.repeats * 476
    assert len({t.config_hash for t in trials}) == len(trials)
    dyn = [t for t in trials if t.method == "dynatree"]
    assert {t.max_new_tokens for t in dyn} == {100, 200, 500, 750, 1000, 1500}
    assert {t.params["verifier"] for t in dyn} == {"greedy"}
    assert {t.seed for t in trials} == {0, 1}


def test_example_files_validate():
    _, real = load_sweep(EXAMPLES / "quickstart_real.yaml")
    assert len({t.method for t in real}) == 6 and len(real) == 6
    assert "lookup" in {t.method for t in real}  # make demo shows prompt lookup
    _, tiny = load_sweep(EXAMPLES / "quickstart_tiny.yaml")
    assert {t.method for t in tiny} == {"autoregressive", "linear", "fixed_tree"}


def test_sweep_24_and_stable_hash(tmp_path):
    _, trials = load_sweep(sweep_24(tmp_path / "s.yaml"))
    assert len(trials) == 24
    again = load_sweep(sweep_24(tmp_path / "t.yaml"))[1]
    assert [t.config_hash for t in trials] == [t.config_hash for t in again]
    # The hash depends on the resolved config only (param order, int vs float do not matter).
    t = trials[3]
    swapped = TrialConfig.from_dict(
        {**t.to_dict(), "params": dict(reversed(list(t.params.items()))), "temperature": 0}
    )
    assert swapped.config_hash == t.config_hash
    golden = TrialConfig(
        target="tiny-llama",
        draft="tiny-llama-draft",
        dataset="spec_bench",
        prompts=1,
        method="linear",
        params={"k": 2, "verifier": "greedy"},
        max_new_tokens=8,
    )
    # Golden value: changing it re-runs every stored config; bump records.CONFIG_VERSION then.
    assert golden.config_hash == "66d81396c209b5062a42b3eb6f8e06c9a04b1f8d6c44d0af2988e4297afffe68"
    assert golden.config_hash == TrialConfig.from_dict(golden.to_dict()).config_hash


def test_max_new_tokens_precedence(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("""
name: p
pairs: [{target: tiny-llama, draft: tiny-llama-draft}]
dataset: {name: spec_bench, prompts: 1}
max_new_tokens: [16, 32]
methods:
  - name: autoregressive
  - name: linear
    params: {max_new_tokens: 8, k: 2}
  - name: fixed_tree
    grid: {max_new_tokens: [4], depth: [2, 3]}
""")
    _, trials = load_sweep(p)
    got = Counter((t.method, t.max_new_tokens) for t in trials)
    assert got == {
        ("autoregressive", 16): 1,
        ("autoregressive", 32): 1,
        ("linear", 8): 1,
        ("fixed_tree", 4): 2,
    }


def test_defaults_resolved_into_params(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("""
name: d
pairs: [{target: tiny-llama, draft: tiny-llama-draft}]
methods: [{name: fixed_tree, grid: {depth: [2]}}]
""")
    sweep, (t,) = load_sweep(p)
    assert t.params == {"depth": 2, "branch": 2, "budget": 32, "verifier": "greedy"}
    assert (t.dataset, t.prompts, t.max_new_tokens) == ("spec_bench", 10, 128)


def test_engine_axis_and_hashes_of_eager_trials(tmp_path):
    """`engine` is a grid axis; an eager trial keeps the hash it had before the field existed
    (the golden hash above), a fast one differs."""
    p = tmp_path / "e.yaml"
    p.write_text(
        "name: e\npairs: [{target: tiny-llama, draft: tiny-llama-draft}]\n"
        "dataset: {name: spec_bench, prompts: 1}\nengine: [eager, fast]\n"
        "methods: [{name: linear, grid: {k: [2, 3]}}]\n"
    )
    sweep, trials = load_sweep(p)
    assert sweep.engines == ("eager", "fast") and sweep.to_dict()["engine"] == ["eager", "fast"]
    assert Counter(t.engine for t in trials) == {"eager": 2, "fast": 2}
    eager = next(t for t in trials if t.engine == "eager")
    fast = TrialConfig.from_dict({**eager.to_dict(), "engine": "fast"})
    assert fast.config_hash != eager.config_hash


def test_lean_engines_are_axis_values_for_llama_and_qwen2_pairs_only(tmp_path):
    """ENGINE+lean (our own forward, engine/runtime/lean.py) is an engine value like the others;
    a pair it cannot run fails the sweep file with one line naming the model, before loading."""
    p = tmp_path / "e.yaml"
    body = "dataset: {name: spec_bench, prompts: 1}\nengine: [graphs, graphs+lean]\n"
    body += "methods: [{name: linear}]\n"
    p.write_text("name: e\npairs: [{target: tiny-llama, draft: tiny-llama-draft}]\n" + body)
    _, trials = load_sweep(p)
    assert sorted(t.engine for t in trials) == ["graphs", "graphs+lean"]
    p.write_text("name: e\npairs: [{target: tiny-neox, draft: tiny-neox-draft}]\n" + body)
    with pytest.raises(
        SpecError,
        match=r"pairs\[0\]\.target: engine \+lean: the model is not "
        "supported: its family is 'gpt_neox'",
    ):
        load_sweep(p)


BASE = """\
name: bad
pairs: [{target: tiny-llama, draft: tiny-llama-draft}]
dataset: {name: spec_bench, prompts: 2}
"""


@pytest.mark.parametrize(
    "body, message",
    [
        ("methods: [{name: nope}]", "methods[0].name: unknown method 'nope'"),
        (
            "methods: [{name: linear, grid: {kk: [1]}}]",
            "methods[0].grid.kk: unknown parameter 'kk' for method 'linear'",
        ),
        ("methods: [{name: linear, params: {kk: 1}}]", "methods[0].params.kk: unknown parameter"),
        (
            "methods: [{name: linear, grid: {k: [1, two]}}]",
            "methods[0].grid.k[1]: expected an integer, got 'two'",
        ),
        (
            "methods: [{name: linear, grid: {k: ['3']}}]",
            "methods[0].grid.k[0]: expected an integer",
        ),
        ("methods: [{name: linear, grid: {k: [1.5]}}]", "expected an integer, got 1.5"),
        ("methods: [{name: linear, grid: {k: []}}]", "methods[0].grid.k: empty grid axis"),
        ("methods: [{name: linear, grid: {}}]", "methods[0].grid: empty grid"),
        ("methods: [{name: linear, grid: {k: 3}}]", "methods[0].grid.k: expected a list"),
        (
            "methods: [{name: linear, grid: {k: [0]}}]",
            "(grid point k=0): method 'linear': k must be",
        ),
        ("methods: [{name: linear, params: {verifier: nope}}]", "unknown verifier 'nope'"),
        ("methods: []", "methods: empty list"),
        ("methods: [{name: linear, gird: {k: [1]}}]", "methods[0].gird: unknown key"),
        ("methods: [{name: linear}]\nrepeat: 2", "bad.yaml: repeat: unknown key"),
        ("methods: [{name: linear}]\nsampling: {temp: 1}", "sampling.temp: unknown key"),
        (
            "methods: [{name: linear}]\nsampling: {temperature: hot}",
            "sampling.temperature: expected",
        ),
        (
            "methods: [{name: linear}]\nsampling: {points: []}",
            "sampling.points: empty list",
        ),
        (
            "methods: [{name: linear}]\nsampling: {points: [{top_p: 0.9}]}",
            "sampling.points[0]: missing required key 'temperature'",
        ),
        (
            "methods: [{name: linear}]\nsampling: {points: [{temperature: 1, top_p: 1.5}]}",
            "sampling.points[0].top_p: must be <= 1.0, got 1.5",
        ),
        (
            "methods: [{name: linear}]\nsampling: {points: [{temperature: 1, top: 0.9}]}",
            "sampling.points[0].top: unknown key",
        ),
        (
            "methods: [{name: linear}]\nsampling: {points: [[1.0, 0.9]]}",
            "sampling.points[0]: expected a mapping",
        ),
        (
            "methods: [{name: linear}]\nsampling: {temperature: [0, 1], "
            "points: [{temperature: 1.0}]}",
            "sampling.points[0]: temperature 1, top_p 1 is given twice",
        ),
        ("methods: [{name: linear}]\nrepeats: 0", "repeats: must be >= 1"),
        (
            "methods: [{name: linear}]\nmax_new_tokens: [8, x]",
            "max_new_tokens[1]: expected an integ",
        ),
        ("methods: [{name: linear}]\ndevice: gpu", "device: 'gpu' is not one of"),
        (
            "methods: [{name: linear}]\nengine: [fast, turbo]",
            "engine[1]: 'turbo' is not one of eager, fast, compiled, graphs, fast+lean",
        ),
    ],
)
def test_bad_specs_name_the_path(tmp_path, body, message):
    p = tmp_path / "bad.yaml"
    p.write_text(BASE + body + "\n")
    with pytest.raises(SpecError) as e:
        load_sweep(p)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "name: x\npairs: [{target: nope, draft: tiny-llama-draft}]\nmethods: [{name: linear}]\n",
            "pairs[0].target: unknown model 'nope'",
        ),
        (
            "name: x\npairs: [{target: tiny-llama}]\nmethods: [{name: linear}]\n",
            "pairs[0]: missing required key 'draft'",
        ),
        (
            "name: x\npairs: [{target: tiny-llama, draft: tiny-llama-draft}]\n"
            "dataset: {name: nope}\nmethods: [{name: linear}]\n",
            "dataset: unknown dataset 'nope'",
        ),
        (
            "name: x\npairs: [{target: tiny-llama, draft: tiny-llama-draft}]\n"
            "dataset: {name: humaneval, prompts: 1000}\nmethods: [{name: linear}]\n",
            "asked for 1000 prompts",
        ),
        ("name: x\npairs: [{target: a, draft: b}\nmethods: [", "malformed YAML at line"),
        ("- just\n- a list\n", "expected a mapping"),
        ("", "expected a mapping, got None"),
    ],
)
def test_bad_files(tmp_path, text, message):
    p = tmp_path / "f.yaml"
    p.write_text(text)
    with pytest.raises(SpecError) as e:
        load_sweep(p)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_missing_file(tmp_path):
    with pytest.raises(SpecError, match="cannot read sweep file"):
        load_sweep(tmp_path / "none.yaml")


def test_grid_and_params_conflict(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(BASE + "methods: [{name: linear, params: {k: 2}, grid: {k: [1, 2]}}]\n")
    with pytest.raises(SpecError, match=r"grid.k: also set in .*params"):
        load_sweep(p)


def test_temperature_axis_picks_verifier(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text(BASE + "sampling: {temperature: [0.0, 1.0]}\nmethods: [{name: autoregressive}]\n")
    _, trials = load_sweep(p)
    assert {(t.temperature, t.params["verifier"]) for t in trials} == {
        (0.0, "greedy"),
        (1.0, "naive"),
    }


def test_a_driver_needs_no_models_and_no_data(tmp_path, monkeypatch):
    """The real pair validates by name on a machine where it was never fetched (workers fetch
    it), and the prompts come from the package: no ORCH_HOME models, no ORCH_DATA_DIR."""
    monkeypatch.setenv("ORCH_HOME", str(tmp_path / "empty-home"))
    monkeypatch.delenv("ORCH_DATA_DIR", raising=False)
    p = tmp_path / "real.yaml"
    p.write_text(
        "name: real\npairs: [{target: qwen2.5-coder-1.5b, draft: qwen2.5-coder-0.5b}]\n"
        "dataset: {name: humaneval, prompts: 3}\nmethods: [{name: linear}]\n"
    )
    _, trials = load_sweep(p)
    assert [t.target for t in trials] == ["qwen2.5-coder-1.5b"]
    assert not (tmp_path / "empty-home").exists()  # nothing fetched, nothing created


def test_model_folders_are_checked_where_they_load(tmp_path):
    """A folder path is checked on the driver for a local run; for a remote cluster
    (local_models=False) the worker that loads it checks it. A plain unknown name is refused
    either way."""
    p = tmp_path / "f.yaml"
    p.write_text(
        "name: f\npairs: [{target: /models/llama-7b, draft: tiny-llama-draft}]\n"
        "methods: [{name: linear}]\n"
    )
    with pytest.raises(SpecError, match=r"pairs\[0\].target: unknown model '/models/llama-7b'"):
        load_sweep(p)
    _, trials = load_sweep(p, local_models=False)
    assert trials[0].target == "/models/llama-7b"
    p.write_text(p.read_text().replace("/models/llama-7b", "llama-7b"))
    with pytest.raises(SpecError, match="unknown model 'llama-7b'"):
        load_sweep(p, local_models=False)


def test_explicit_sampling_points_beside_the_grid(tmp_path):
    """The Delayed Tree Expansion paper's 8 settings: temperatures at top-p 1 (the grid) plus
    T=1 at top-p 0.9 and 0.99 (explicit points), not the 6 x 3 cartesian product."""
    p = tmp_path / "s.yaml"
    p.write_text(
        BASE
        + "sampling:\n  temperature: [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]\n"
        + "  points: [{temperature: 1.0, top_p: 0.9}, {temperature: 1.0, top_p: 0.99}]\n"
        + "methods: [{name: autoregressive}]\n"
    )
    sweep, trials = load_sweep(p)
    settings = [(t.temperature, t.top_p) for t in trials]
    grid = [(t, 1.0) for t in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)]
    assert settings == grid + [(1.0, 0.9), (1.0, 0.99)]
    assert sweep.to_dict()["sampling"]["points"] == [[1.0, 0.9], [1.0, 0.99]]
    # points only: no default grid point (T=0, top-p 1) is added
    p.write_text(
        BASE + "sampling: {points: [{temperature: 0.6}]}\nmethods: [{name: autoregressive}]\n"
    )
    _, trials = load_sweep(p)
    assert [(t.temperature, t.top_p, t.params["verifier"]) for t in trials] == [(0.6, 1.0, "naive")]
    # without points the stored spec (and so every stored hash) is unchanged
    p.write_text(BASE + "sampling: {temperature: 0.6}\nmethods: [{name: autoregressive}]\n")
    sweep, _ = load_sweep(p)
    assert sweep.to_dict()["sampling"] == {"temperature": [0.6], "top_p": [1.0]}


def test_draft_none_for_model_free_methods_only(tmp_path):
    """`draft: none`: a pair without a draft model, for prompt lookup; a method that runs the
    draft model is refused with one line naming the pair and the method."""
    p = tmp_path / "s.yaml"
    p.write_text("""
name: lk
pairs: [{target: tiny-llama, draft: none}]
methods: [{name: autoregressive}, {name: lookup}, {name: lookup_tree, params: {budget: 8}}]
""")
    _, trials = load_sweep(p)
    assert {t.draft for t in trials} == {"none"}
    assert [t.method for t in trials] == ["autoregressive", "lookup", "lookup_tree"]
    p.write_text("""
name: lk
pairs: [{target: tiny-llama, draft: none}]
methods: [{name: lookup}, {name: lookup_hybrid}]
""")
    with pytest.raises(SpecError, match=r"pairs\[0\]\.draft: none, but method 'lookup_hybrid'"):
        load_sweep(p)
