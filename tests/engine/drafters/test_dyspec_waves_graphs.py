"""DySpec's Algorithm 1 on the padded graph engines expands in waves (engine/drafters/dyspec.py
grow_greedy): the same trees as the eager path's one node per draft forward, in fewer forwards.
The tiny draft's distributions are near uniform (its trees are stars below the root, one
forward), so here its output layer is sharpened: deep trees, many expansions per iteration."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from engine.decode import generate
from tests.engine.golden import COUNTED, PROMPTS, reference


@pytest.fixture(scope="module")
def sharp_pair(llama_pair):
    draft = copy.deepcopy(llama_pair.draft.model)
    with torch.no_grad():
        draft.get_output_embeddings().weight.mul_(10.0)
    return dataclasses.replace(llama_pair, draft=dataclasses.replace(llama_pair.draft, model=draft))


def test_waves_build_the_eager_trees_in_fewer_draft_forwards(sharp_pair):
    ids = sharp_pair.target.tokenizer.encode(PROMPTS[0])
    runs = {e: generate(sharp_pair, ids, "dyspec", 40, engine=e) for e in ("eager", "graphs")}
    assert (
        runs["graphs"].tokens == runs["eager"].tokens == list(reference(sharp_pair, PROMPTS[0], 40))
    )
    counted = [k for k in COUNTED if k != "draft_forwards"]
    its = {e: g.stats.iterations for e, g in runs.items()}
    assert [[getattr(i, k) for k in counted] for i in its["graphs"]] == [
        [getattr(i, k) for k in counted] for i in its["eager"]
    ]
    forwards = {e: sum(i.draft_forwards for i in it) for e, it in its.items()}
    assert forwards["eager"] >= 3 * len(its["eager"])  # deep trees: several expansions each
    assert forwards["graphs"] < 0.6 * forwards["eager"]  # 17.7 against 38.7 per iteration
