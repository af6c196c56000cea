"""Capabilities as data: each drafter's declared tree sampling and each verifier's declared
modes decide, before any model loads, which pairings `resolve_method` accepts, and the same
declarations are what the built trees and the verifiers' runtime checks obey."""

from __future__ import annotations

import pytest
import torch

from engine.config import ConfigError, parse_config
from engine.draft import DecodeState, DraftModel
from engine.drafters import DRAFTERS
from engine.iteration import iterate
from engine.methods import Method, compatible_verifiers, resolve_method
from engine.runtime.eager import CachedModel
from engine.sampling import Warp
from engine.verify import VERIFIERS
from tests.method_cases import SMALL

TEMPERATURES = (0.0, 0.8)


def _step(pair, method: str, verifier: str, temperature: float):
    """One decoding iteration of `method` with `verifier`, bypassing resolve_method."""
    cfg = parse_config(DRAFTERS[method].config, SMALL.get(method, {}))
    w = Warp(temperature, 1.0)
    target, draft = CachedModel(pair.target.model), DraftModel(pair.draft.model, w)
    committed = [3, 9, 14, 3]  # the root 3 recurs: prompt lookup drafts 9, 14, 3
    target.extend(committed[:-1])
    state = DecodeState(prefix_len=3, root_token=3, warp=w, remaining=8, context=committed)
    gen = torch.Generator().manual_seed(0)
    return iterate(target, draft, Method(method, cfg, verifier), committed, state, gen)


@pytest.mark.parametrize("temperature", TEMPERATURES)
@pytest.mark.parametrize("method", list(DRAFTERS))
def test_declarations_match_the_trees_and_the_runtime_checks(llama_pair, method, temperature):
    """The built tree carries the declared sampling; every verifier that resolve_method accepts
    verifies it, and every stochastic verifier it refuses raises at run time too (greedy at
    T > 0 runs but is not lossless, so it is refused by declaration alone)."""
    declared = DRAFTERS[method].sampling
    ok = compatible_verifiers(method, temperature)
    assert DRAFTERS[method].default_verifier in ok or temperature == 0.0
    for verifier in VERIFIERS:
        if verifier in ok:
            step = _step(llama_pair, method, verifier, temperature)
            resolve_method(method, {"verifier": verifier}, temperature)
            if declared is None:
                assert step.tree.size == 1
            else:  # a real tree, so that the runtime checks have something to refuse
                assert step.tree.size > 1 and step.tree.sampling == declared.at(temperature == 0.0)
        else:
            with pytest.raises(ConfigError, match="compatible verifiers: " + ", ".join(ok)):
                resolve_method(method, {"verifier": verifier}, temperature)
            if verifier != "greedy":
                with pytest.raises(ValueError, match=verifier):
                    _step(llama_pair, method, verifier, temperature)


def test_deterministic_trees_at_positive_temperature_take_nss_only():
    assert compatible_verifiers("dynatree", 0.8) == ["nss"]
    assert "greedy" in compatible_verifiers("dynatree", 0.0)
    assert set(compatible_verifiers("autoregressive", 0.8)) == set(VERIFIERS) - {"greedy"}
    assert compatible_verifiers("iid", 0.8) == [
        v for v in VERIFIERS if "iid" in VERIFIERS[v].modes and v != "greedy"
    ]
