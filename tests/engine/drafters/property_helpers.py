"""What the model-free property tests of the tree builders share (test_properties.py,
test_dynatree_properties.py): their Hypothesis settings and a strategy of small parameter
dicts per method. Each test module seeds a torch generator of its own (GEN)."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st

FAST = settings(max_examples=25, deadline=None)

# method -> strategy of (small) parameter dicts
PARAMS = {
    "dynatree": st.fixed_dictionaries(
        {
            "D0": st.integers(1, 4),
            "B_mid": st.integers(1, 3),
            "N_max": st.integers(1, 30),
            "tau": st.sampled_from([0.0, 0.01, 0.05]),
            "rho_stop": st.sampled_from([0.001, 0.05]),
            "dynamic_breadth": st.booleans(),
            "dynamic_depth": st.booleans(),
        }
    ),
    "dyspec": st.fixed_dictionaries(
        {
            "budget": st.integers(1, 30),
            "variant": st.sampled_from(["fixed_size", "threshold"]),
            "threshold": st.sampled_from([0.001, 0.02, 0.2]),
        }
    ),
    "salf": st.integers(1, 20).flatmap(
        lambda n: st.fixed_dictionaries(
            {"N": st.just(n), "B": st.integers(1, n), "th": st.sampled_from([0.0, 0.1, 0.6])}
        )
    ),
    "beam": st.fixed_dictionaries(
        {"N": st.integers(1, 30), "top_k": st.integers(1, 4), "depth": st.integers(1, 5)}
    ),
    "ddtree": st.fixed_dictionaries({"B": st.integers(1, 40), "L": st.integers(1, 6)}),
    "specinfer": st.fixed_dictionaries(
        {"expansion": st.lists(st.integers(1, 3), min_size=1, max_size=4).map(tuple)}
    ),
    "sequoia": st.fixed_dictionaries(
        {
            "budget": st.integers(1, 30),
            "max_depth": st.integers(1, 6),
            "profile": st.lists(st.floats(0.0, 0.25), min_size=1, max_size=4).map(tuple),
        }
    ),  # sum <= 1
}
