"""One of N concurrent writer processes (test_concurrent_writers.py).

Each opens the store (the first ones create the schema concurrently), submits the shared
sweep and its own sweep, races the others for the shared trials (compare-and-set claims),
records results for what it won and for all of its own trials, and writes a few duplicate
results for finished shared trials (they must be ignored). Prints how many shared trials it won.
"""

import sys

from sqlalchemy import select

from db.models import SweepTrial, Trial
from orchestrator.store import Store
from tests.orchestrator.orch_helpers import fake_config, fake_result

SHARED = 40
OWN = 10


def main(url: str, index: int) -> None:
    store = Store(url)
    shared = [fake_config(i) for i in range(1, SHARED + 1)]
    own = [fake_config(1000 + index * OWN + j) for j in range(OWN)]
    sid = store.submit("shared", {"name": "shared"}, shared, "v").sweep_id
    mine = store.submit(f"writer-{index}", {"name": f"writer-{index}"}, own, "v").sweep_id
    store.begin_run(mine)
    for tid, cfg, _ in store.runnable(mine):
        assert store.mark_running(tid, f"writer-{index}", None)
        store.record_result(tid, fake_result(cfg, throughput=float(index)))
    store.finish_run(mine)
    with store.Session() as s:
        rows = s.execute(
            select(Trial.id, Trial.config)
            .join(SweepTrial)
            .where(SweepTrial.sweep_id == sid)
            .order_by(Trial.id)
        ).all()
    rows = rows[index % SHARED :] + rows[: index % SHARED]  # spread the starting points
    won = 0
    for tid, config in rows:
        if store.mark_running(tid, f"writer-{index}", None):
            won += 1
            cfg = next(c for c in shared if c.config_hash == _hash(config))
            store.record_result(tid, fake_result(cfg, throughput=float(index)))
    # Duplicates of finished shared trials: ignored by ON CONFLICT DO NOTHING. Only trials
    # already done: a trial another writer has claimed but not yet recorded would take this
    # result as its first (the claim and the record are two transactions).
    with store.Session() as s:
        done = s.execute(
            select(Trial.id, Trial.config)
            .join(SweepTrial)
            .where(SweepTrial.sweep_id == sid, Trial.status == "done")
            .order_by(Trial.id)
        ).all()
    for tid, config in done[:3]:
        cfg = next(c for c in shared if c.config_hash == _hash(config))
        store.record_result(tid, fake_result(cfg, throughput=-1.0))
    store.close()
    print(won)


def _hash(config: dict) -> str:
    from orchestrator.records import TrialConfig

    return TrialConfig.from_dict(config).config_hash


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
