"""The method registry (engine/drafters): one record per method, complete and consistent, and
the only place in the library that names a method."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from engine.drafters import AUTOREGRESSIVE, DRAFTERS, MODEL_FREE, PROBE_TREES
from engine.drafters.record import Drafter
from engine.methods import resolve_method
from engine.tree import SAMPLING_MODES
from engine.verify import VERIFIERS
from tests.method_cases import SMALL

ROOT = Path(__file__).resolve().parents[3]
LIBRARY = ("engine", "tree_kernels", "db", "orchestrator")
# a method's name as a string literal outside engine/drafters/, each with why it must stay one:
# (file, name) -> reason
ALLOWED: dict[tuple[str, str], str] = {
    ("orchestrator/results/settings.py", "autoregressive"): "BASELINE: query and compare read "
    "it without importing torch (engine.drafters does); held equal to AUTOREGRESSIVE below",
    ("orchestrator/cli/generate.py", "linear"): "orch generate's --method default, shown by "
    "--help, which imports no torch; held to the registry below",
    ("orchestrator/acceptance.py", "sequoia"): "the method whose measured profile the driver "
    "and the store handle without importing torch; held to the registry below",
}


def test_the_names_kept_outside_are_the_registry_s():
    from orchestrator.cli import main
    from orchestrator.results.settings import BASELINE

    assert BASELINE == AUTOREGRESSIVE
    generate = main.commands["generate"]
    assert next(p.default for p in generate.params if p.name == "method") in DRAFTERS
    from orchestrator.acceptance import MEASURED, SEQUOIA

    needs = [n for n, d in DRAFTERS.items() if d.measured_first is not None]
    assert needs == [SEQUOIA] and DRAFTERS[SEQUOIA].config().profile == MEASURED


def test_method_cases_cover_the_registry():
    assert set(SMALL) == set(DRAFTERS)


@pytest.mark.parametrize("name", list(DRAFTERS))
def test_each_record_is_complete(name):
    d = DRAFTERS[name]
    assert isinstance(d, Drafter) and d.name == name
    assert dataclasses.is_dataclass(d.config) and d.config.__dataclass_params__.frozen
    assert d.default_verifier in VERIFIERS
    assert (d.plan is None) == (d.grow is None)  # a device plan has both halves
    assert d.model_free == (name in MODEL_FREE)
    m = resolve_method(name, dict(SMALL[name]), 0.0)
    assert d.nodes(m.cfg) >= 0 and d.chain(m.cfg) >= 0
    if d.budget is not None:
        assert d.budget in {f.name for f in dataclasses.fields(d.config)}


def test_probe_trees_draw_each_sampling_mode():
    for mode, (method, params) in PROBE_TREES.items():
        assert DRAFTERS[method].sampling.at(False) == mode
        resolve_method(method, params, 1.0)


def _literals(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    return [
        (n.lineno, n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in DRAFTERS
    ]


def test_no_method_is_named_outside_its_home():
    """Code outside engine/drafters/ asks the registry (a record's fields, DRAFTERS, or
    AUTOREGRESSIVE) instead of comparing with a method's name. A verifier's or a tree
    sampling's name that is also a method's ("specinfer", "iid") is one of those there."""
    other = set(VERIFIERS) | set(SAMPLING_MODES)
    found = []
    for part in LIBRARY:
        for path in sorted((ROOT / part).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("engine/drafters/"):
                continue
            for line, name in _literals(path):
                if name not in other and (rel, name) not in ALLOWED:
                    found.append(f"{rel}:{line}: {name!r}")
    assert found == []


def test_no_device_plan_lives_outside_its_method():
    assert sorted(p.name for p in (ROOT / "engine").glob("*_step.py")) == []
