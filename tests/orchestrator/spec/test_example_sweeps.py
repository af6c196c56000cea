"""The papers' sweep files (examples/*.yaml) and the `scale:` block (orchestrator/spec/scale.py):
every file loads and expands at its own and at its reduced scale, to the trial counts its
header states (recomputed here from the grids), with the same method parameter points at both
scales and no config hash in common; bad scale blocks are one error line, nothing written."""

from __future__ import annotations

import collections
import functools
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import engine.models
from orchestrator.acceptance import is_acceptance
from orchestrator.cli import main
from orchestrator.spec import load_sweep
from orchestrator.spec.values import SpecError
from orchestrator.store import Store
from tests.orchestrator.orch_helpers import REPO, stub_eagle_heads

EXAMPLES = REPO / "examples"
# (full, scaled) trial counts, computed from each file's grid as its header spells them out
COUNTS = {
    "dynatree_450.yaml": (
        (6 * 3 * 5 * 5 + 3 * 6 + 8) * 2,  # grid x lengths + 3 baselines x 6 lengths + ablation
        6 * 3 * 5 + 3 + 8 - 1,  # one length, one repeat: ablation all-off = grid point
    ),
    "delayed_verifiers.yaml": (8 * (8 * (4 * 3 + 3 * 3 * 2) + 1),) * 2,  # tv: bv's alias
    "dyspec.yaml": (2 * (2 * 5 + 5 + 5 + 1 + 1),) * 2,  # + Sequoia's acceptance trial per T
    "salf.yaml": (3 * 2 * (5 + 1 + 1),) * 2,
    "ddtree.yaml": (3 * (9 + 10),) * 2,  # two chains at T = 1, one at T = 0
    "cross_model.yaml": (3 * 2 * (12 + 1) + 3,) * 2,  # + acceptance per pair and T, profiles
}
PAPERS = sorted(COUNTS)


@functools.cache
def _load(name: str, scaled: bool):
    return load_sweep(EXAMPLES / name, scaled=scaled)


def _points(trials) -> set:
    """The method parameter points of a trial set (sizes and seeds left out; profile trials,
    which measure devices, not methods, too)."""
    return {
        (t.method, tuple(sorted(t.params.items())), t.temperature, t.top_p, t.target, t.draft)
        for t in _measured(trials)
    }


def _measured(trials) -> list:
    """The method trials: not the profile and acceptance trials, which measure pairs (the
    acceptance trials are the same at both scales: orchestrator/acceptance.py)."""
    return [t for t in trials if not t.is_profile and not is_acceptance(t)]


def test_every_example_file_is_listed():
    with_block = {p.name for p in EXAMPLES.glob("*.yaml") if "\nscale:" in p.read_text()}
    assert with_block == set(COUNTS) | {"salf_talf_eagle.yaml"}  # its own test: named heads


@pytest.mark.parametrize("name", PAPERS)
def test_example_expands_at_both_scales_to_its_stated_counts(name):
    text = (EXAMPLES / name).read_text()
    stated = re.search(r"^# trials: full (\d+)\b.*?; scaled (\d+)\b", text, re.M)
    assert stated, f"{name}: no '# trials: full N ...; scaled M' line in the header"
    assert (int(stated[1]), int(stated[2])) == COUNTS[name]
    assert re.search(r"Sec\. \d|Table \d|Fig\. \d", text.split("\nname:")[0]) or "cross" in name
    sweep, full = _load(name, False)
    small_sweep, small = _load(name, True)
    assert (len(full), len(small)) == COUNTS[name]
    assert small_sweep.name == sweep.name + "-scaled"
    assert _points(small) == _points(full)  # the grid is unchanged
    assert not {t.config_hash for t in _measured(small)} & {t.config_hash for t in _measured(full)}
    small, full = _measured(small), _measured(full)
    assert {t.max_new_tokens for t in small} < {t.max_new_tokens for t in full} or max(
        t.max_new_tokens for t in small
    ) < min(t.max_new_tokens for t in full)
    assert max(t.prompts for t in small) < min(t.prompts for t in full)


def test_dynatree_450_is_the_papers_grid():
    sweep, trials = _load("dynatree_450.yaml", False)
    assert {(d.name, d.prompts, d.prompt_tokens) for d in sweep.datasets} == {
        ("wikitext2", 10, 800)
    }
    grid = [t for t in trials if t.method == "dynatree" and t.max_new_tokens <= 1000]
    assert len(grid) == 450 * 2
    for t in grid:  # the fixed backbone: phases off, the tree is depth D0 with B_mid children
        p = t.params
        assert not (p["dynamic_breadth"] or p["dynamic_depth"] or p["history_adaptation"])
    assert {t.params["D0"] for t in grid} == set(range(3, 9))
    assert {t.params["B_mid"] for t in grid} == {2, 3, 4}
    assert {t.params["tau"] for t in grid} == {0.01, 0.02, 0.03, 0.05, 0.1}
    ablation = [t for t in trials if t.method == "dynatree" and t.max_new_tokens == 1500]
    assert len({tuple(sorted(t.params.items())) for t in ablation}) == 8
    assert {(t.params["B_min"], t.params["B_max"], t.params["D_max"]) for t in ablation} == {
        (1, 3, 8)
    }
    base = {t.method: t.params for t in trials if t.method in ("linear", "fixed_tree")}
    assert base["linear"]["k"] == 5
    assert (base["fixed_tree"]["depth"], base["fixed_tree"]["branch"]) == (5, 2)
    assert base["fixed_tree"]["budget"] == 256
    ar = {t.max_new_tokens for t in trials if t.method == "autoregressive"}
    assert ar == {100, 200, 500, 750, 1000, 1500}


def test_delayed_verifiers_runs_every_verifier_at_the_papers_8_settings():
    sweep, trials = _load("delayed_verifiers.yaml", False)
    # (temperature, top_p); the draft samples with the target's settings (None, None)
    assert sweep.settings == tuple((t, 1.0, None, None) for t in (0.2, 0.4, 0.6, 0.8, 1.0, 1.2)) + (
        (1.0, 0.9, None, None),
        (1.0, 0.99, None, None),
    )
    for method in ("iid", "delayed"):
        verifiers = {t.params["verifier"] for t in trials if t.method == method}
        assert len(verifiers) == 8 and not {"greedy", "tv"} & verifiers


def test_dyspec_drafts_at_0_6_for_both_target_temperatures():
    # DySpec Sec. 5.1: the draft samples at 0.6 whether the target runs at 0 or at 0.6
    sweep, trials = _load("dyspec.yaml", False)
    assert sweep.settings == ((0.0, 1.0, 0.6, None), (0.6, 1.0, 0.6, None))
    drafted = [t for t in trials if t.method != "autoregressive"]
    assert {t.temperature for t in drafted} == {0.0, 0.6}
    for t in drafted:  # a draft temperature equal to the target's is stored as None
        assert (t.draft_temperature or t.temperature) == 0.6


def test_ddtree_chains_at_temperature_1_include_vanilla_dflash():
    # DDTree Sec. 5 compares with vanilla DFlash: its block is the draft's argmax, accepted
    # while it matches the target's samples (a greedy chain walked as DDTree walks its tree)
    _, trials = _load("ddtree.yaml", False)
    chains = {
        (t.dataset, t.temperature, t.draft_temperature, t.params["verifier"])
        for t in trials
        if t.method == "linear"
    }
    for d in ("math500", "gsm8k", "humaneval"):
        assert {c[1:] for c in chains if c[0] == d} == {
            (0.0, None, "greedy"),
            (1.0, 0.0, "nss"),
            (1.0, None, "naive"),
        }
    ddtree = {t.params["verifier"] for t in trials if t.method == "ddtree" and t.temperature}
    assert ddtree == {"nss"}


# ----------------------------------------------------------------------------- the block

BASE = """name: tiny-scale
pairs: [{target: tiny-llama, draft: tiny-llama-draft}]
dataset: {name: spec_bench, prompts: 6, prompt_tokens: 64}
max_new_tokens: 16
repeats: 2
methods:
  - name: autoregressive
    grid: {max_new_tokens: [12, 16]}
  - name: linear
    params: {max_new_tokens: 20}
    grid: {k: [2, 3]}
"""


def _file(tmp_path: Path, scale: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(BASE + scale)
    return path


def test_scale_block_shrinks_sizes_not_the_grid(tmp_path):
    path = _file(
        tmp_path, "scale: {prompts: 2, prompt_tokens: 32, max_new_tokens: 4, repeats: 1}\n"
    )
    sweep, full = load_sweep(path)
    plain = tmp_path / "plain.yaml"
    plain.write_text(BASE)
    assert [t.config_hash for t in full] == [t.config_hash for t in load_sweep(plain)[1]]
    small_sweep, small = load_sweep(path, scaled=True)
    assert len(full) == (2 + 2) * 2 and len(small) == 1 + 2
    assert _points(small) == _points(full)
    assert {(t.prompts, t.prompt_tokens, t.max_new_tokens, t.repeat) for t in small} == {
        (2, 32, 4, 0)
    }
    assert small_sweep.to_dict()["name"] == "tiny-scale-scaled"


@pytest.mark.parametrize(
    "scale, message",
    [
        ("scale: 3\n", "scale: expected a mapping"),
        ("scale: {}\n", "scale: expected a mapping"),
        ("scale: {prompt: 2}\n", "scale.prompt: unknown key"),
        ("scale: {prompts: 0}\n", "scale.prompts: must be >= 1"),
        ("scale: {prompts: '2'}\n", "scale.prompts: expected an integer"),
        ("scale: {prompts: 7}\n", "scale.prompts: 7 is more than the file's prompts"),
        ("scale: {prompt_tokens: 65}\n", "scale.prompt_tokens: 65 is more than"),
        ("scale: {max_new_tokens: [4, 21]}\n", "scale.max_new_tokens[1]: 21 is more than"),
        ("scale: {repeats: 3}\n", "scale.repeats: 3 is more than the file's repeats"),
        ("scale: {warmup: 1}\n", "scale.warmup: 1 is more than the file's warmup"),
        ("scale: {pairs: []}\n", "scale.pairs: empty list"),
        ("scale: {pairs: [{target: tiny-neox}]}\n", "scale: pairs[0]: missing required key"),
        ("scale: {repeats: 1}\n", "its trials would be the full run's own"),
        ("scale: {prompts: 6, max_new_tokens: 16}\n", "its trials would be the full run's own"),
        ("", "--scale, but the file has no scale: block"),
    ],
)
def test_bad_scale_blocks_are_one_error_line(tmp_path, scale, message):
    path = _file(tmp_path, scale)
    with pytest.raises(SpecError) as e:
        load_sweep(path, scaled=True)
    assert message in str(e.value) and "\n" not in str(e.value)
    assert str(path) in str(e.value)
    if scale:  # the block is checked without --scale too
        with pytest.raises(SpecError):
            load_sweep(path)
    db = tmp_path / "o.db"
    r = CliRunner().invoke(main, ["submit", str(path), "--scale", "--db", f"sqlite:///{db}"])
    assert r.exit_code == 2
    assert r.output.strip().splitlines() == [f"error: {e.value}"]
    assert not db.exists()  # nothing written


def test_submit_scaled_on_the_tiny_pair_says_which_scale_ran(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        "# The paper, Sec. 1, Table 1.\n"
        + BASE.replace("grid: {k: [2, 3]}", "grid: {k: [2]}")
        + "scale: {prompts: 1, prompt_tokens: 8, max_new_tokens: 2, repeats: 1}\n"
    )
    url = f"sqlite:///{tmp_path / 'o.db'}"
    r = CliRunner().invoke(
        main, ["submit", str(path), "--scale", "--executor", "local", "--db", url]
    )
    assert r.exit_code == 0, r.output
    assert "scale: reduced by the file's scale: block (prompts 1, prompt_tokens 8" in r.output
    assert "sweep 'tiny-scale-scaled'" in r.output and "2 trials; ran 2 (2 done" in r.output
    # the stored sweep keeps the file's comment and the block that ran (`orch report` header)
    store = Store(url, mode="read")
    assert store.sweep("tiny-scale-scaled")["spec"]["source"] == {
        "file": "s.yaml",
        "comment": "The paper, Sec. 1, Table 1.",
        "scale": {"prompts": 1, "prompt_tokens": 8, "max_new_tokens": 2, "repeats": 1},
    }
    store.close()
    out = tmp_path / "report"
    r = CliRunner().invoke(main, ["report", "--db", url, "-o", str(out)])
    assert r.exit_code == 0, r.output
    md = (out / "report.md").read_text()
    assert "The paper, Sec. 1, Table 1." in md and "Scale: reduced by the file's scale: block" in md
    assert "lossless: greedy check, 1/1 prompts" in md  # certified at temperature 0


def test_the_synthetic_gpu_sweep_expands_without_building_a_model(monkeypatch):
    """examples/synthetic_gpu.yaml: its header's count, the synthetic names in their one
    spelling, checked from the names alone (nothing is built before a worker runs a trial)."""

    def refuse(*a, **k):
        raise AssertionError("a synthetic model was built while checking the sweep")

    monkeypatch.setattr(engine.models, "build_synthetic", refuse)
    text = (EXAMPLES / "synthetic_gpu.yaml").read_text()
    stated = int(re.search(r"^# trials: .*= (\d+)$", text, re.M)[1])
    _, trials = load_sweep(EXAMPLES / "synthetic_gpu.yaml")
    assert len(trials) == stated == 30
    assert {t.target for t in trials} == {
        "synthetic:qwen2.5-7b@align=0.75",
        "synthetic:qwen2.5-7b@align=0.9",
        "synthetic:qwen2.5-1.5b@align=0.75",
    }
    assert {t.draft for t in trials} == {"synthetic:qwen2.5-0.5b"}


def test_the_salf_talf_eagle_grid_expands_without_building_a_model(monkeypatch, tmp_path):
    """examples/salf_talf_eagle.yaml (Sec. 4.1, Tables 1-3): the three heads (stub checkpoints
    here: the file names heads trained for the real target) x EAGLE-2's beam, SpecExec's
    optimal tree and SALF, with an autoregressive baseline per pair, x T 0 and 1 x HumanEval,
    GSM8K and Spec-Bench: its header's count, and nothing loaded."""

    def refuse(*a, **k):
        raise AssertionError("a model was loaded while checking the sweep")

    monkeypatch.setattr(engine.models, "load_model", refuse)
    text = (EXAMPLES / "salf_talf_eagle.yaml").read_text()
    heads = stub_eagle_heads(text, monkeypatch, tmp_path)
    assert heads == ["qwen-eagle", "qwen-hass", "qwen-talf"]
    stated = re.search(r"^# trials: full (\d+)\b.*?scaled (\d+)\b", text, re.M | re.S)
    assert re.search(r"Sec\. 4\.1|Table \d", text.split("\nname:")[0])
    assert (int(stated[1]), int(stated[2])) == (3 * 3 * 2 * 4,) * 2
    sweep, trials = load_sweep(EXAMPLES / "salf_talf_eagle.yaml")
    small_sweep, small = load_sweep(EXAMPLES / "salf_talf_eagle.yaml", scaled=True)
    assert len(trials) == len(small) == 72 and small_sweep.name == sweep.name + "-scaled"
    assert {(t.dataset, t.prompts, t.prompt_tokens, t.max_new_tokens) for t in small} == {
        (d, 4, 128, 32) for d in ("humaneval", "gsm8k", "spec_bench")
    }  # examples/salf.yaml's cut: the same prompts
    assert {t.target for t in trials} == {"qwen2.5-coder-1.5b"}
    assert {t.draft for t in trials} == {f"eagle:{h}" for h in heads}
    assert {(t.dataset, t.prompts, t.max_new_tokens) for t in trials} == {
        ("humaneval", 10, 512), ("gsm8k", 10, 512), ("spec_bench", 10, 512)
    }  # fmt: skip
    assert {t.temperature for t in trials} == {0.0, 1.0}
    methods = collections.Counter(
        (t.method, tuple(sorted((k, v) for k, v in t.params.items() if k != "verifier")))
        for t in trials
    )
    # each at every (head, dataset, temperature): 3 x 3 x 2 trials
    assert methods == {
        ("autoregressive", ()): 18,
        ("beam", (("N", 60), ("depth", 7), ("top_k", 10))): 18,  # EAGLE-2
        ("salf", (("B", 10), ("N", 60), ("th", 0.0))): 18,  # SpecExec's optimal tree
        ("salf", (("B", 10), ("N", 60), ("th", 0.6))): 18,  # SALF
    }
