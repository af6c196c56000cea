"""Configs of the paper builders: paper defaults, strict parsing through `orch generate`, one
clear error line for out-of-range values."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from engine.config import ConfigError
from engine.methods import method_params, resolve_method
from orchestrator.cli import main

DEFAULTS = {
    "dynatree": {
        "D0": 5,
        "D_max": 8,
        "B_min": 1,
        "B_mid": 2,
        "B_max": 3,
        "tau_h": 0.9,
        "tau_l": 0.4,
        "tau": 0.03,
        "N_max": 256,
    },
    "dyspec": {"budget": 64, "variant": "fixed_size", "threshold": 0.001},
    "salf": {"N": 60, "B": 10, "th": 0.6},
    "beam": {"N": 60, "top_k": 10, "depth": 7},
    "ddtree": {"B": 256, "L": 15, "drafter": "ar"},  # block size 16: the bonus + 15
    "specinfer": {"k": 2, "depth": 4, "expansion": ()},
    "sequoia": {"budget": 64, "max_depth": 10, "profile": "measured"},
}


@pytest.mark.parametrize("method", sorted(DEFAULTS))
def test_paper_defaults(method):
    params = method_params(resolve_method(method))
    for key, value in DEFAULTS[method].items():
        assert params[key] == value, (method, key)
    assert params["verifier"] == "greedy"


@pytest.mark.parametrize(
    "method,params,needle",
    [
        ("dynatree", {"depth": "4", "D0": "3"}, "either depth or D0"),
        ("dynatree", {"tau_l": "0.95"}, "tau_l < tau_h"),
        ("dyspec", {"variant": "heap"}, "not one of"),
        ("dyspec", {"threshold": "0"}, "threshold must be in (0, 1)"),
        ("salf", {"B": "61"}, "1 <= B <= N"),
        ("salf", {"th": "1"}, "th must be in [0, 1)"),
        ("beam", {"top_k": "0"}, ">= 1"),
        ("ddtree", {"drafter": "dflash"}, "not one of"),
        ("specinfer", {"expansion": "8,8,8,8,8"}, "nodes"),
        ("sequoia", {"profile": "0.7,0.5"}, "sum <= 1"),
        ("sequoia", {"profile": [[0.5], [0.2]]}, "expected a number"),  # wrong shape
        ("sequoia", {"profile": "learned"}, "not one of measured, fixed"),
        ("sequoia", {"profile": "fixed", "width": "4"}, "length of a measured profile"),
    ],
)
def test_bad_values_are_config_errors(method, params, needle):
    with pytest.raises(ConfigError) as e:
        resolve_method(method, params)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_orch_generate_with_the_sweep_names():
    r = CliRunner().invoke(
        main,
        [
            "generate",
            "--method",
            "dynatree",
            "--param",
            "depth=3",
            "--param",
            "branch=3",
            "--param",
            "threshold=0.001",
            "--prompt",
            "Hello",
            "--max-new-tokens",
            "9",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert len(out["tokens"]) == 9
    assert (out["params"]["D0"], out["params"]["B_mid"], out["params"]["tau"]) == (3, 3, 0.001)
