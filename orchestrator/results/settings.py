"""What "the same settings as the autoregressive baseline" means: the SETTINGS a trial's row
is keyed on (settings_key) wherever it meets its baseline. A method's speedup is its
throughput over the mean throughput of the BASELINE trials with the same key (frame.py
add_speedup); `orch query`'s groups, `orch compare`'s best config per setting and its
per-prompt speedups (query.py), `ar_equal` (certificates.py), the cost model's predictions
(profiles.py), `orch report` (paper/) and bench/greedy_vs_ar.py all key on it.

A config is more than its settings: CONFIG_KEY adds the draft's dtype, the method and its
parameters (an autoregressive trial has no draft of its own, so the draft's dtype and
sampling, DRAFT_SETTINGS, are not part of the baseline's key).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from orchestrator.results.values import cell_value

if TYPE_CHECKING:
    import pandas as pd

BASELINE = "autoregressive"
SETTINGS = (
    "target",
    "draft",
    "dataset",
    "prompts",
    "category",
    "prompt_tokens",
    "chat",
    "temperature",
    "top_p",
    "max_new_tokens",
    "device",
    "dtype",
    "engine",  # a method's speedup is against autoregressive decoding on its own engine path
)
# the draft's own settings: part of a config, not of its baseline's settings
DRAFT_SETTINGS = ("draft_temperature", "draft_top_p", "draft_dtype")
CONFIG_KEY = (*SETTINGS, "draft_dtype", "method", "params")


def settings_key(row: Mapping[str, Any], fields: Sequence[str] = SETTINGS) -> str:
    """A row's key over `fields` (default SETTINGS): equal for rows with the same settings,
    None and NaN alike."""
    return json.dumps([cell_value(row[c]) for c in fields], default=str)


def settings_keys(df: pd.DataFrame, fields: Sequence[str] = SETTINGS) -> pd.Series:
    """settings_key of every row of `df`."""
    return df[list(fields)].apply(lambda r: settings_key(r, fields), axis=1)
