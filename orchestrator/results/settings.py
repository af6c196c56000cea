"""What "the same settings as the autoregressive baseline" means: the SETTINGS a trial's row
is keyed on (settings_key) wherever it meets its baseline. A method's speedup is its
throughput over the mean throughput of the BASELINE trials with the same key (frame.py
add_speedup); `orch query`'s groups, `orch compare`'s best config per setting and its
per-prompt speedups and intervals (query.py, intervals.py), `ar_equal` (certificates.py), the
cost model's predictions (profiles.py), `orch report` (paper/) and bench/greedy_vs_ar.py all
key on it.

The last setting is the `machine` a trial ran on (machine()): a speedup is a ratio of two
throughputs measured on the same device, never across machines; a trial whose machine has no
autoregressive trial with its other settings has no speedup, and `speedup_note` says why.

A config is more than its settings: CONFIG_KEY adds the draft's own settings (dtype and
sampling, DRAFT_SETTINGS), the method and its parameters (an autoregressive trial has no draft
of its own, so DRAFT_SETTINGS are not part of the baseline's key).
"""

from __future__ import annotations

import json
import re
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
    "target_revision",  # ... of the same model revisions (engine/hub.py)
    "draft_revision",
    "placement",  # ... placed alike (engine/placement.py; the frame's `k=v,...` text)
    "machine",  # ... and on the same device (machine())
)
# the draft's own settings: part of a config, not of its baseline's settings
DRAFT_SETTINGS = ("draft_temperature", "draft_top_p", "draft_dtype")
CONFIG_KEY = (*SETTINGS, *DRAFT_SETTINGS, "method", "params")
# a CPU model name identifies the machine when it names a model (a digit: "AMD EPYC 7763",
# "Intel(R) Xeon(R) Gold 6248", "Apple M2"); a bare family ("AMD EPYC", "Intel(R) Xeon(R)
# Processor", as some VMs report) also needs the host. The clock ("@ 2.80GHz") names no model.
_CLOCK = re.compile(r"@\s*[\d.]+\s*[GM]Hz", re.IGNORECASE)


def machine(device: Any, device_name: Any, host: Any) -> str:
    """The device a trial's throughput was measured on, as its speedup's baseline must share
    it: a GPU's recorded name (trials.device_name, e.g. "NVIDIA H100 80GB HBM3"); a CPU's
    model name, with " @ host" where the name alone names no model; "unrecorded @ host" for a
    trial stored without a device name (before migration 0007)."""
    name = cell_value(device_name) or ""
    host = cell_value(host) or "?"
    if not name:
        return f"unrecorded @ {host}"
    gpu = str(cell_value(device) or "").startswith("cuda")
    if gpu or re.search(r"\d", _CLOCK.sub("", name)):
        return name
    return f"{name} @ {host}"


def settings_key(row: Mapping[str, Any], fields: Sequence[str] = SETTINGS) -> str:
    """A row's key over `fields` (default SETTINGS): equal for rows with the same settings,
    None and NaN alike."""
    return json.dumps([cell_value(row[c]) for c in fields], default=str)


def settings_keys(df: pd.DataFrame, fields: Sequence[str] = SETTINGS) -> pd.Series:
    """settings_key of every row of `df` (column by column: a row-wise apply took seconds on
    a sweep of thousands of trials)."""
    import pandas as pd  # lazy: pandas (this module is read by ones that do not need it)

    columns = [df[c].tolist() for c in fields]
    keys = [json.dumps([cell_value(v) for v in row], default=str) for row in zip(*columns)]
    return pd.Series(keys, index=df.index, dtype=object)
