"""dtype per role: `dtype: {target: float32, draft: bfloat16}` in a sweep reaches the trial
and the loaded pair; a single dtype leaves stored trials' hashes as they were."""

from __future__ import annotations

import pytest
import torch

from orchestrator.records import TrialConfig
from orchestrator.run import trial
from orchestrator.spec.expand import expand
from orchestrator.spec.parse import parse_sweep
from orchestrator.spec.values import SpecError

BASE = {
    "name": "dt",
    "pairs": [{"target": "tiny-llama", "draft": "tiny-llama-draft"}],
    "dataset": {"name": "spec_bench", "prompts": 1},
    "max_new_tokens": 4,
    "methods": [{"name": "linear", "params": {"k": 2}}],
}


def _trials(dtype):
    sweep = parse_sweep({**BASE, "dtype": dtype})
    return sweep, expand(sweep)


def test_per_role_dtype_reaches_the_trial_and_the_pair():
    sweep, [cfg] = _trials({"target": "float32", "draft": "bf16"})
    assert (cfg.dtype, cfg.draft_dtype) == ("float32", "bf16")
    assert sweep.to_dict()["dtype"] == {"target": "float32", "draft": "bf16"}
    pair, _ = trial.get_pair(cfg.pair_key)
    assert pair.target.model.dtype == torch.float32
    assert pair.draft.model.dtype == torch.bfloat16


def test_one_dtype_keeps_the_old_hash():
    _, [one] = _trials("bf16")
    _, [same] = _trials({"target": "bf16", "draft": "bf16"})
    assert one.draft_dtype is None and one.config_hash == same.config_hash
    old = {k: v for k, v in one.to_dict().items() if k != "draft_dtype"}
    assert TrialConfig.from_dict(old).config_hash == one.config_hash
    _, [split] = _trials({"target": "bf16", "draft": "float32"})
    assert split.config_hash != one.config_hash


@pytest.mark.parametrize(
    "dtype, message",
    [
        ({"target": "fp8"}, "dtype.target: 'fp8' is not one of"),
        ({"draft": "int4"}, "dtype.draft: 'int4' is not one of"),
        ({"verifier": "bf16"}, "verifier"),
        ("fp64", "dtype: 'fp64' is not one of"),
    ],
)
def test_bad_role_dtype(dtype, message):
    with pytest.raises(SpecError, match=message):
        _trials(dtype)
