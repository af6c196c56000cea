"""Issue 20, part A: answers a researcher can act on (Spec-Bench tasks, per-group query,
winner naming in compare, most recent sweep by default, params.* export columns, load())."""

from __future__ import annotations

import pytest
import yaml

from engine.datasets import DatasetError, default_category, load_prompts
from orchestrator.records import TrialConfig
from orchestrator.spec import expand, parse_sweep

TASKS = ["mt_bench", "translation", "summarization", "qa", "math_reasoning", "rag"]

# ---------------------------------------------------------------- Spec-Bench tasks


def test_spec_bench_all_is_stratified_over_the_six_tasks():
    picked = load_prompts("spec_bench", n=12, category="all")
    assert [p.task for p in picked] == TASKS * 2
    # within mt_bench, round-robin over its 8 MT-Bench sub-categories
    assert [p.category for p in picked if p.task == "mt_bench"] == ["writing", "roleplay"]
    assert load_prompts("spec_bench", n=30, category="all")[:12] == picked  # prefix
    assert len(load_prompts("spec_bench", category="all")) == 480


@pytest.mark.parametrize(
    "name, task",
    [
        ("mt_bench", "mt_bench"),
        ("Multi-turn conversation", "mt_bench"),
        ("translation", "translation"),
        ("Summarization", "summarization"),
        ("question answering", "qa"),
        ("Math Reasoning", "math_reasoning"),
        ("Retrieval-augmented generation", "rag"),
    ],
)
def test_spec_bench_tasks_by_name(name, task):
    got = load_prompts("spec_bench", category=name)
    assert len(got) == 80 and {p.task for p in got} == {task}


def test_old_selections_are_unchanged():
    """Stored trials (category None, or an MT-Bench sub-category) keep their prompts."""
    legacy = load_prompts("spec_bench", n=13)
    assert len({p.category for p in legacy}) == 13
    assert [p.category for p in legacy[:3]] == ["writing", "roleplay", "reasoning"]
    assert [p.id for p in load_prompts("spec_bench", n=3, category="math")] == ["111", "112", "113"]
    assert load_prompts("pg19", n=10) == load_prompts("pg19", n=10, category="all")


def test_unknown_category_names_tasks_and_categories():
    with pytest.raises(DatasetError, match="tasks: mt_bench, translation, .*categories: writing"):
        load_prompts("spec_bench", category="poetry")


def _cfg(text: str) -> list[TrialConfig]:
    return expand(parse_sweep(yaml.safe_load(text)), local_models=True)


SWEEP = """\
name: t
pairs: [{target: tiny-llama, draft: tiny-llama-draft}]
dataset: {name: %s, prompts: 2%s}
max_new_tokens: 4
methods: [{name: autoregressive}]
"""


def test_sweep_default_is_the_six_tasks_and_hashes_differ_from_stored_trials():
    (new,) = _cfg(SWEEP % ("spec_bench", ""))
    assert new.category == "all" == default_category("spec_bench")
    stored = TrialConfig(**{**new.to_dict(), "category": None})  # a trial made before
    assert new.config_hash != stored.config_hash
    # other datasets keep category None, so their sweeps' hashes do not move
    (gsm,) = _cfg(SWEEP % ("gsm8k", ""))
    assert gsm.category is None
    (sub,) = _cfg(SWEEP % ("spec_bench", ", category: coding"))
    assert sub.category == "coding"
