"""The papers' own pairs as sweep files (examples/papers/*.yaml, docs/models.md): each parses
and passes the dry validation a driver of a remote cluster does (`orch submit --address`:
load_sweep with local_models=False) with no network and an empty Hugging Face cache, so
nothing is downloaded; every model is a hub id with its revision, pinned commits kept in the
trials' identity; the big targets carry their placement. Validated for a local run instead
(the trials would run here, offline), the first uncached model is refused in one line."""

from __future__ import annotations

import re

import pytest

from engine.hub import COMMIT, is_hub_id
from orchestrator.spec import load_sweep
from orchestrator.spec.values import SpecError
from orchestrator.spec.yaml_file import read_yaml
from tests.orchestrator.orch_helpers import REPO

PAPERS = sorted((REPO / "examples" / "papers").glob("*.yaml"))
PLACED = {"dyspec_70b_offload.yaml": ("cpu", 1), "delayed_tree_expansion_llama70b.yaml": (None, 2)}


@pytest.fixture
def no_hub(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path / "hf"


def test_there_is_a_file_for_each_paper():
    stems = {p.stem.split("_70b")[0].split("_llama70b")[0] for p in PAPERS}
    assert stems == {"ddtree", "delayed_tree_expansion", "dynatree", "dyspec", "salf_talf"}


@pytest.mark.parametrize("path", PAPERS, ids=[p.name for p in PAPERS])
def test_each_file_validates_without_a_download(path, no_hub):
    sweep, trials = load_sweep(path, local_models=False)
    assert trials and not no_hub.exists()  # nothing fetched, not even a cache folder
    given = {}
    for pair in read_yaml(path)["pairs"]:
        for role in ("target", "draft"):
            given[pair[role]["name"]] = pair[role]["revision"]
    assert all(is_hub_id(name) for name in given)  # the papers' models, not the bundled pair
    for t in trials:
        assert (t.target_revision, t.draft_revision) == (given[t.target], given[t.draft])
        assert t.placement == sweep.placement
    pinned = [r for r in given.values() if COMMIT.fullmatch(r)]
    assert pinned or path.name.startswith("delayed"), "pin at least one commit per paper"
    if path.name in PLACED:
        offload, gpus = PLACED[path.name]
        assert (sweep.placement.get("offload"), trials[0].gpus) == (offload, gpus)
    else:
        assert sweep.placement is None


def test_validated_for_a_local_run_the_first_uncached_model_is_one_line(no_hub):
    path = REPO / "examples" / "papers" / "dyspec.yaml"
    with pytest.raises(SpecError) as e:
        load_sweep(path, local_models=True)
    line = str(e.value)
    assert "\n" not in line and re.search(
        r"pairs\[0\]\.target: model meta-llama/Llama-2-7b-hf@01c7f73d\w+ is not in the "
        r"Hugging Face cache .* and HF_HUB_OFFLINE is set",
        line,
    ), line
