"""Each trial's losslessness certificate as two frame columns (issue 17), for `orch query`
(`--where lossless=checked`, `--columns +lossless,ar_equal`), `orch compare` and `orch report`.

`lossless`, one word:
- checked: temperature 0; every prompt's output passed the trial's teacher-forced check (it is
  the target's own greedy decoding; engine/certify.py).
- mismatch: temperature 0; some prompt's output failed that check.
- tested: temperature > 0; the stored distribution check of the trial's verifier, tree
  sampling and sampling setting passed (engine/distribution_check.py, `orch certify`).
- failed: that check failed.
- claimed: temperature > 0; the verifier declares itself lossless for these trees, and the
  database has no check of this setting yet (`orch certify SWEEP` runs the missing ones).
- exact: temperature > 0, sampled from the target alone (autoregressive): nothing to verify.
- lossy: temperature > 0; the verifier does not declare itself lossless for these trees (a
  sweep refuses such a pairing before it runs; a trial stored otherwise shows it).
- uncertified: the trial ran with `certify: false`.
A config over several repeats shows the worst of its trials' words (`worst`).

`ar_equal`: at temperature 0, how many prompts' output tokens equal those of the
autoregressive trial with the same settings (report.py SETTINGS, the speedup's baseline), as
"k/n"; "-" at temperature > 0 or without such a trial.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from engine.certify import GREEDY_CHECK, trial_certificate
from engine.distribution_check import Setting
from orchestrator.records import TrialConfig
from orchestrator.results.frame import BASELINE, plain, settings_key
from orchestrator.results.verifier_checks import Key, key, trial_setting

# best to worst: a config shows its worst trial's word
WORDS = ("checked", "tested", "exact", "claimed", "uncertified", "failed", "lossy", "mismatch")
COLUMNS = ("lossless", "ar_equal")


def lossless_word(
    row: dict[str, Any], per_prompt: list[dict[str, Any]], checks: dict[Key, dict[str, Any]]
) -> str:
    """The `lossless` word of one trial (see the module docstring)."""
    cert = trial_certificate(per_prompt or [])
    if cert is None:
        return "uncertified"
    if cert["check"] == GREEDY_CHECK:
        return "checked" if cert["lossless"] else "mismatch"
    if not cert.get("verifier_declares_lossless"):
        return "lossy"
    setting = row_setting(row)
    if setting is None:
        return "exact"
    found = checks.get(key(setting))
    if found is None:
        return "claimed"
    return "tested" if found["passed"] else "failed"


def row_setting(row: dict[str, Any]) -> Setting | None:
    """verifier_checks.trial_setting of a results-frame row (a dict of its columns)."""
    fields = {k: plain(row[k]) for k in TrialConfig.__dataclass_fields__ if k in row}
    return trial_setting(TrialConfig.from_dict({**fields, "params": _params(row)}))


def _params(row: dict[str, Any]) -> dict[str, Any]:
    """The trial's method parameters: its row's `param.*` cells that are set."""
    params = {k.removeprefix("param."): plain(v) for k, v in row.items() if k.startswith("param.")}
    return {k: v for k, v in params.items() if v is not None}


def worst(words: pd.Series) -> str:
    return max(words, key=WORDS.index)


def add_certificates(df: pd.DataFrame, checks: dict[Key, dict[str, Any]]) -> pd.DataFrame:
    """`df` (with per_prompt, report.load_frame(per_prompt=True)) with `lossless` and
    `ar_equal` added."""
    records = df.drop(columns=["per_prompt", "per_iteration"], errors="ignore").to_dict("records")
    lossless = [
        lossless_word(r, pp, checks) for r, pp in zip(records, df["per_prompt"], strict=True)
    ]
    skey = settings_key(df)
    base: dict[str, dict[Any, list[int]]] = {}
    for k, method, pp in zip(skey, df["method"], df["per_prompt"], strict=True):
        if method == BASELINE:
            base.setdefault(k, {p.get("id"): p.get("tokens") for p in pp or []})
    equal = []
    for k, t, pp in zip(skey, df["temperature"], df["per_prompt"], strict=True):
        ref = base.get(k)
        if t != 0.0 or ref is None or not pp:
            equal.append("-")
            continue
        same = sum(p.get("tokens") == ref.get(p.get("id")) for p in pp)
        equal.append(f"{same}/{len(pp)}")
    return df.assign(lossless=lossless, ar_equal=equal)
