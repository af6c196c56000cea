"""Does every greedy trial of a sweep emit exactly the autoregressive trial's tokens?

For each done trial at temperature 0, find the done autoregressive trial of the same sweep
with the same settings (KEY: the baseline's SETTINGS, orchestrator/results/settings.py, the
machine included, but on any engine path and top-p, and per draft dtype and repeat), and compare the output tokens
prompt by prompt (results.per_prompt[*].tokens). DESIGN.md's contract: greedy
speculative decoding reproduces the target's own greedy output token for token. This is the
cross-trial check beside each trial's own certificate (engine/certify/teacher_forced.py, a teacher-forced
target forward); in float32 on one device both should hold. Reads the database only.

    python -m bench.greedy_vs_ar SWEEP [--db URL]
"""

from __future__ import annotations

import argparse

from orchestrator.records import TrialConfig
from orchestrator.results import SETTINGS, machine, settings_key
from orchestrator.store import Store

# The settings a greedy trial shares with its autoregressive trial: the baseline's SETTINGS, at
# temperature 0 on both sides (so top-p changes no token) and on any engine path (greedy output
# must not depend on it), per draft dtype and repeat.
KEY = (
    *(c for c in SETTINGS if c not in ("temperature", "top_p", "engine")),
    "draft_dtype",
    "repeat",
)


def _key(c: TrialConfig, device_name: str | None, host: str | None) -> str:
    return settings_key({**c.to_dict(), "machine": machine(c.device, device_name, host)}, KEY)


def compare(store: Store, sweep: str) -> list[dict]:
    """One row per greedy non-autoregressive done trial: equal, prompts compared, first
    differing prompt (None when equal) or `no autoregressive trial`."""
    from sqlalchemy import select

    from db.models import Result, Sweep, SweepTrial, Trial

    with store.Session() as s:
        members = select(SweepTrial.trial_id).join(Sweep).where(Sweep.name == sweep)
        rows = s.execute(
            select(Trial.id, Trial.config, Trial.device_name, Trial.worker_host, Result.per_prompt)
            .join(Result, Result.trial_id == Trial.id)
            .where(Trial.id.in_(members))
        ).all()
    done = [(i, TrialConfig.from_dict(c), _key(TrialConfig.from_dict(c), d, h), pp)
            for i, c, d, h, pp in rows]  # fmt: skip
    ar = {
        k: [p["tokens"] for p in pp]
        for _, c, k, pp in done
        if c.method == "autoregressive" and c.temperature == 0
    }
    out = []
    for i, c, k, pp in sorted(done, key=lambda r: r[0]):
        if c.temperature != 0 or c.method in ("autoregressive", "profile"):
            continue
        ref = ar.get(k)
        mine = [p["tokens"] for p in pp]
        diff = (
            None
            if ref is None
            else next((k for k, (a, b) in enumerate(zip(ref, mine)) if a != b), None)
        )
        out.append(
            {
                "trial": i,
                "config": c.label(),
                "equal": None if ref is None else (diff is None and len(ref) == len(mine)),
                "prompts": len(mine),
                "first_diff_prompt": diff,
            }
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweep")
    ap.add_argument("--db", default=None)
    a = ap.parse_args()
    store = Store(a.db, mode="read")
    try:
        rows = compare(store, a.sweep)
    finally:
        store.close()
    for r in rows:
        eq = (
            "no autoregressive trial"
            if r["equal"] is None
            else ("equal" if r["equal"] else f"DIFFERS at prompt {r['first_diff_prompt']}")
        )
        print(f"{r['trial']:>5}  {eq:<24} {r['prompts']} prompts  {r['config']}")
    checked = [r for r in rows if r["equal"] is not None]
    print(f"{sum(r['equal'] for r in checked)} of {len(checked)} greedy trials with an autoregressive "
          f"trial emit its tokens exactly ({len(rows) - len(checked)} without one)")  # fmt: skip


if __name__ == "__main__":
    main()
