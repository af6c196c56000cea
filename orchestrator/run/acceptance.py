"""The driver's part of Sequoia's measured acceptance profiles (orchestrator/acceptance.py): a
pass runs its acceptance trials first, so their profiles are stored before the Sequoia trials
that need them are dispatched with the stored vectors attached."""

from __future__ import annotations

from orchestrator.acceptance import is_acceptance, key, needs_profile
from orchestrator.run.executors import Job
from orchestrator.store import Store


def with_acceptance(matched: list, rows: list) -> list:
    """The runnable rows an `--only` cut matched, with the acceptance trials their Sequoia
    trials need (orchestrator/acceptance.py) though the cut names other methods."""
    keys = {_key_str(key(c)) for _, c, _ in matched if needs_profile(c)}
    extra = [
        r for r in rows if is_acceptance(r[1]) and _key_str(key(r[1])) in keys and r not in matched
    ]
    return extra + matched


def acceptance_first(jobs: list[Job]) -> list[list[Job]]:
    """The acceptance trials first, then the others (each batch non-empty)."""
    first = [j for j in jobs if is_acceptance(j.config)]
    rest = [j for j in jobs if not is_acceptance(j.config)]
    return [b for b in (first, rest) if b]


def attach_acceptance(store: Store, jobs: list[Job]) -> None:
    """Attach the stored acceptance profile to each Sequoia job with a measured profile (the
    worker never reads the database); one with none stored fails on its worker, saying so."""
    found: dict[str, tuple | None] = {}
    for job in jobs:
        if needs_profile(job.config):
            k = key(job.config)
            if _key_str(k) not in found:
                found[_key_str(k)] = store.acceptance_profile(k)
            job.acceptance = found[_key_str(k)]


def _key_str(k: dict) -> str:
    return repr(sorted(k.items()))
