"""Sequoia's measured acceptance profiles in a sweep: which trials need one, the acceptance
trial that measures it, and the key it is stored and looked up under.

Sequoia (Chen et al. 2024, Sec. 3.1) fits its tree to the acceptance vector p_1..p_K of the
pair and sampling it runs with. A Sequoia trial with `profile: measured` (the default,
engine/drafters/sequoia/build.py) therefore gets an acceptance trial (method `acceptance`,
added by orchestrator/spec/expand.py): its identity is the key below plus a fixed measurement
`PROTOCOL`, so every sweep that needs the same key shares one trial row and it is measured
once. The flow keeps the workers free of the database:

1. the driver runs a pass's acceptance trials before its other trials (run/runner.py);
2. the worker measures (run/trial.py run_acceptance, engine/drafters/sequoia/profile.py) on
   the dataset's last `PROTOCOL["prompts"]` prompts (`held_out`: none of a sweep's first
   ones unless it uses nearly the whole dataset) and returns the vector in its result;
3. the driver stores it in `acceptance_profiles` (Store.record_result; the first measurement
   of a key stands) and attaches the stored vector to each Sequoia job of that key
   (`Job.acceptance`), which the worker builds its trees from; the trial records the vector
   it used beside its learned components (`trials.checkpoints`).

The key: target, draft, dtype and draft dtype, dataset, temperature, top-p, the draft's
temperature and top-p (resolved: the target's where the trial has none) and the width K.
"""

from __future__ import annotations

from typing import Any

from engine.datasets import load_prompts
from orchestrator.records import TrialConfig

ACCEPTANCE = "acceptance"  # the method name of an acceptance trial
# the method that needs one, read here without importing torch (engine.drafters does); held to
# its record (measured_first, profile "measured") by tests/engine/drafters/test_registry.py
SEQUOIA, MEASURED = "sequoia", "measured"
# how an acceptance trial measures (engine/drafters/sequoia/profile.py measure_profile): the
# dataset's last `prompts` prompts cut to `prompt_tokens`, `new_tokens` target tokens each,
# `samples` draw sets per position where the draft samples
PROTOCOL = {"prompts": 6, "prompt_tokens": 128, "new_tokens": 48, "samples": 16}
DEFAULT_WIDTH = 8  # SequoiaConfig.width's default: left out of the trials' params


def needs_profile(c: TrialConfig) -> bool:
    """A Sequoia trial whose tree is built from a measured acceptance profile."""
    return c.method == SEQUOIA and c.params.get("profile") == MEASURED


def is_acceptance(c: TrialConfig) -> bool:
    return c.method == ACCEPTANCE


def acceptance_trial(c: TrialConfig) -> TrialConfig:
    """The acceptance trial that measures the profile Sequoia trial `c` needs."""
    return TrialConfig(
        target=c.target,
        draft=c.draft,
        dataset=c.dataset,
        prompts=PROTOCOL["prompts"],
        method=ACCEPTANCE,
        params={
            "width": c.params.get("width", DEFAULT_WIDTH),
            "new_tokens": PROTOCOL["new_tokens"],
            "samples": PROTOCOL["samples"],
        },
        max_new_tokens=PROTOCOL["new_tokens"],
        temperature=c.temperature,
        top_p=c.top_p,
        prompt_tokens=PROTOCOL["prompt_tokens"],
        chat=c.chat,
        device=c.device,
        dtype=c.dtype,
        draft_dtype=c.draft_dtype,
        draft_temperature=c.draft_temperature,
        draft_top_p=c.draft_top_p,
        certify=False,
        target_revision=c.target_revision,  # the models Sequoia's trial loads (engine/hub.py)
        draft_revision=c.draft_revision,
        prompt_file=c.prompt_file,  # a user's prompt file: its last prompts (run/runner.py)
        placement=c.placement,
    )


def key(c: TrialConfig) -> dict[str, Any]:
    """The stored profile's key (db.models.AcceptanceProfile) of a Sequoia or acceptance trial."""
    return {
        "target": c.target,
        "draft": c.draft,
        "dtype": c.dtype,
        "draft_dtype": c.draft_dtype or c.dtype,
        "dataset": c.dataset,
        "temperature": c.temperature,
        "top_p": c.top_p,
        "draft_temperature": c.temperature if c.draft_temperature is None else c.draft_temperature,
        "draft_top_p": c.top_p if c.draft_top_p is None else c.draft_top_p,
        "width": int(c.params.get("width", DEFAULT_WIDTH)),
    }


def held_out(dataset: str, n: int, category: str | None = None) -> list:
    """The dataset's last n prompts (an acceptance trial's), in order."""
    return load_prompts(dataset, category=category)[-n:]
