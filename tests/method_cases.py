"""One small config per tree method: trees of a few nodes on the tiny pairs, for the tests that
run every method (tests/engine/drafters/test_registry.py holds this table to the registry)."""

from __future__ import annotations

SMALL: dict[str, dict] = {
    "autoregressive": {},
    "linear": {"k": 3},
    "fixed_tree": {"depth": 3, "branch": 2, "budget": 10},
    "iid": {"K": 3, "L": 2},
    "delayed": {"K": 2, "L1": 1, "L2": 2},
    "dynatree": {"depth": 2, "branch": 2, "N_max": 9},
    "dyspec": {"budget": 7},
    "salf": {"N": 6, "B": 2},
    "beam": {"N": 5, "top_k": 3, "depth": 3},
    "ddtree": {"B": 6, "L": 3},
    "specinfer": {"expansion": [2, 2]},
    "sequoia": {"budget": 6, "max_depth": 3, "profile": "fixed"},  # measured: a sweep's
    "lookup": {"k": 3, "min_ngram": 1},
    "lookup_tree": {"k": 3, "min_ngram": 1, "branches": 3, "budget": 5},
    "lookup_hybrid": {"N": 6, "lookup_budget": 3, "min_ngram": 1},
}
