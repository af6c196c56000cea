"""The certificates of sampled trials in the database (`verifier_checks`, migration 0010):
which distribution checks a sweep's trials need, running the missing ones (`orch certify`),
and reading them for the `lossless` column (orchestrator/results/certificates.py).

A sampled trial (temperature > 0) with a verifier and a drafted tree needs the check of its
`Setting` (engine/distribution_check.py): its verifier, how its trees are drawn at the draft's
temperature, and the sampling of target and draft. Trials at temperature 0 are checked one by
one instead (engine/certify.py); autoregressive trials sample the target alone and need none.
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterable
from dataclasses import asdict
from typing import Any

from sqlalchemy import delete, select

from db.models import VerifierCheck
from engine.distribution_check import Setting
from orchestrator.records import PROFILE, TrialConfig
from orchestrator.store import Store

Key = tuple[str, str, float, float, float, float]


def trial_setting(config: TrialConfig) -> Setting | None:
    """The check a trial's certificate rests on; None for greedy, autoregressive and profile
    trials and for pairings the verifier does not make lossless (a sweep refuses those before
    they run; a trial stored otherwise has no check to rest on)."""
    from engine.methods import tree_sampling
    from engine.verify import VERIFIERS

    if config.temperature == 0.0 or config.method == PROFILE:
        return None
    verifier = VERIFIERS.get(config.params.get("verifier"))
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


def settings(configs: Iterable[TrialConfig]) -> list[Setting]:
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
    """Store (or replace) the check `record` (engine/distribution_check.py check)."""
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
    from engine.distribution_check import check, check_pair
    from orchestrator.run.trial import code_version

    stored = load_checks(store)
    pair, out = None, []
    for s in settings(configs):
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
