"""Each trial's losslessness certificate as two frame columns (issue 17), for `orch query`
(`--where lossless=checked`, `--columns +lossless,ar_equal`), `orch compare` and `orch report`.

`lossless`, one word:
- checked: temperature 0; every prompt's output passed the trial's teacher-forced check (it is
  the target's own greedy decoding; engine/certify/teacher_forced.py).
- mismatch: temperature 0; some prompt's output failed that check.
- tested: temperature > 0; the stored distribution check of the trial's verifier, tree
  sampling and sampling setting passed (engine/certify/distribution.py, `orch certify`).
- failed: that check failed.
- claimed: temperature > 0; the verifier declares itself lossless for these trees, and the
  database has no check of this setting yet (`orch certify SWEEP` runs the missing ones).
- exact: temperature > 0, sampled from the target alone (autoregressive): nothing to verify.
- lossy: temperature > 0; the verifier does not declare itself lossless for these trees (a
  sweep refuses such a pairing before it runs; a trial stored otherwise shows it).
- uncertified: the trial ran with `certify: false`.
A config over several repeats shows the worst of its trials' words (`worst`).

`ar_equal`: at temperature 0, how many prompts' output tokens equal those of the
autoregressive trial with the same settings (settings.py SETTINGS, the speedup's baseline),
as "k/n"; "-" at temperature > 0 or without such a trial.

The certificates of sampled trials rest on distribution checks stored in the database
(`verifier_checks`, migration 0010): which checks a sweep's trials need, running the missing
ones (`orch certify`), and reading them for the `lossless` column.

A sampled trial (temperature > 0) with a verifier and a drafted tree needs the check of its
`Setting` (engine/certify/distribution.py): its verifier, how its trees are drawn at the draft's
temperature, and the sampling of target and draft. Trials at temperature 0 are checked one by
one instead (engine/certify/teacher_forced.py); autoregressive trials sample the target alone and
need none.
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, select

from db.models import VerifierCheck
from engine.certify.distribution import Setting, check, check_pair
from engine.certify.teacher_forced import GREEDY_CHECK, trial_certificate
from engine.methods import tree_sampling
from engine.verify import VERIFIERS, canonical
from orchestrator.records import PROFILE, TrialConfig
from orchestrator.results.settings import BASELINE, settings_keys
from orchestrator.results.values import cell_value
from orchestrator.run import code_version
from orchestrator.store import Store

if TYPE_CHECKING:
    import pandas as pd

Key = tuple[str, str, float, float, float, float]
# best to worst: a config shows its worst trial's word
WORDS = ("checked", "tested", "exact", "claimed", "uncertified", "failed", "lossy", "mismatch")
COLUMNS = ("lossless", "ar_equal")


# ----------------------------------------------------------------------------- frame columns


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
    """trial_setting of a results-frame row (a dict of its columns)."""
    fields = {k: cell_value(row[k]) for k in TrialConfig.__dataclass_fields__ if k in row}
    return trial_setting(TrialConfig.from_dict({**fields, "params": _params(row)}))


def _params(row: dict[str, Any]) -> dict[str, Any]:
    """The trial's method parameters: its row's `param.*` cells that are set."""
    params = {
        k.removeprefix("param."): cell_value(v) for k, v in row.items() if k.startswith("param.")
    }
    return {k: v for k, v in params.items() if v is not None}


def worst(words: pd.Series) -> str:
    return max(words, key=WORDS.index)


def add_certificates(df: pd.DataFrame, checks: dict[Key, dict[str, Any]]) -> pd.DataFrame:
    """`df` (with per_prompt, frame.load_frame(per_prompt=True)) with `lossless` and
    `ar_equal` added."""
    records = df.drop(columns=["per_prompt", "per_iteration"], errors="ignore").to_dict("records")
    lossless = [
        lossless_word(r, pp, checks) for r, pp in zip(records, df["per_prompt"], strict=True)
    ]
    skey = settings_keys(df)
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


# ----------------------------------------------------------------------------- stored checks


def trial_setting(config: TrialConfig) -> Setting | None:
    """The check a trial's certificate rests on; None for greedy, autoregressive and profile
    trials and for pairings the verifier does not make lossless (a sweep refuses those before
    they run; a trial stored otherwise has no check to rest on)."""
    if config.temperature == 0.0 or config.method == PROFILE:
        return None
    verifier = VERIFIERS.get(canonical(config.params.get("verifier")))  # tv: bv
    dt = config.temperature if config.draft_temperature is None else config.draft_temperature
    mode = tree_sampling(config.method, dt)
    if verifier is None or mode is None or not verifier.accepts(mode, config.temperature):
        return None
    return Setting(
        config.params["verifier"],
        mode,
        config.temperature,
        config.top_p,
        draft_temperature=dt,
        draft_top_p=config.top_p if config.draft_top_p is None else config.draft_top_p,
    )


def key(s: Setting) -> Key:
    """A setting's key as stored: the draft's sampling resolved, floats rounded."""
    d = s.draft
    return row_key({**asdict(s), "draft_temperature": d.temperature, "draft_top_p": d.top_p})


def row_key(row: dict[str, Any]) -> Key:
    """The key of a stored check (a `verifier_checks` row as a dict)."""
    return (
        row["verifier"],
        row["tree_sampling"],
        round(row["temperature"], 6),
        round(row["top_p"], 6),
        round(row["draft_temperature"], 6),
        round(row["draft_top_p"], 6),
    )


def needed_checks(configs: Iterable[TrialConfig]) -> list[Setting]:
    """The distinct checks `configs` need, in the order they first appear."""
    out: dict[Key, Setting] = {}
    for c in configs:
        s = trial_setting(c)
        if s is not None:
            out.setdefault(key(s), s)
    return list(out.values())


def load_checks(store: Store) -> dict[Key, dict[str, Any]]:
    """Every stored check by its key."""

    def tx(s) -> dict[Key, dict[str, Any]]:
        rows = s.execute(select(VerifierCheck)).scalars().all()
        cols = [c.name for c in VerifierCheck.__table__.columns]
        return {row_key(r): r for r in ({c: getattr(x, c) for c in cols} for x in rows)}

    return store.transact("reading verifier checks", tx)


def save_check(store: Store, record: dict[str, Any], code_version: str) -> None:
    """Store (or replace) the check `record` (engine/certify/distribution.py check)."""
    s_key = key(
        Setting(
            record["verifier"],
            record["tree_sampling"],
            record["temperature"],
            record["top_p"],
            record["draft_temperature"],
            record["draft_top_p"],
        )
    )
    cols = {c.name for c in VerifierCheck.__table__.columns} - {"id", "created_at"}
    values = {
        **{k: v for k, v in record.items() if k in cols},
        "temperature": s_key[2],
        "top_p": s_key[3],
        "draft_temperature": s_key[4],
        "draft_top_p": s_key[5],
        "code_version": code_version[:80],
        "host": platform.node()[:200],
    }

    def tx(s) -> None:
        names = ("temperature", "top_p", "draft_temperature", "draft_top_p")
        s.execute(
            delete(VerifierCheck).where(
                VerifierCheck.verifier == s_key[0],
                VerifierCheck.tree_sampling == s_key[1],
                *[getattr(VerifierCheck, n) == v for n, v in zip(names, s_key[2:])],
            )
        )
        s.add(VerifierCheck(**values))

    store.transact(f"storing the check of {s_key[0]} on {s_key[1]} trees", tx)


def certify(
    store: Store,
    configs: Iterable[TrialConfig],
    rerun: bool = False,
    echo: Callable[[dict[str, Any], bool], None] = lambda record, stored: None,
) -> list[dict[str, Any]]:
    """Run and store the checks `configs` need that the database lacks (every one with
    `rerun`); `echo(record, was_stored)` after each, a stored one without running it. Returns
    every needed check's record."""
    stored = load_checks(store)
    pair, out = None, []
    for s in needed_checks(configs):
        have = stored.get(key(s))
        if have is not None and not rerun:
            echo(have, True)
            out.append(have)
            continue
        pair = pair or check_pair()
        record = check(s, pair)
        save_check(store, record, code_version())
        record = {**record, "draft_temperature": s.draft.temperature, "draft_top_p": s.draft.top_p}
        echo(record, False)
        out.append(record)
    return out
