"""A sweep's tags and note (migration 0012): the lab's annotations, written by `orch tag` and
`orch note`. Neither touches the sweep's trials, spec or `updated_at` (which picks the most
recent sweep every report reads by default). Run inside one Store.transact."""

from __future__ import annotations

import re
from collections.abc import Sequence

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from db.models import Sweep
from orchestrator.store.sql import StoreError

TAG = re.compile(r"^[\w.:+-]{1,64}$")  # one word: letters, digits, _ . : + -
NOTE_MAX = 10_000


def check_tags(tags: Sequence[str]) -> list[str]:
    bad = [t for t in tags if not TAG.match(t)]
    if bad:
        raise StoreError(
            f"tag {bad[0]!r} is not one word of up to 64 letters, digits, _ . : + or -"
        )
    return list(tags)


def tag(s: Session, name: str, url: str, add: Sequence[str], remove: Sequence[str]) -> list[str]:
    """The sweep's tags with `add` added and `remove` removed (sorted, no repeats)."""
    row = s.execute(select(Sweep.id, Sweep.tags).where(Sweep.name == name)).first()
    if row is None:
        raise StoreError(f"no sweep named {name!r} in {url}")
    tags = sorted((set(row.tags or []) | set(check_tags(add))) - set(remove))
    _set(s, row.id, tags=tags)
    return tags


def note(s: Session, name: str, url: str, text: str | None) -> None:
    """Set the sweep's note (None: remove it)."""
    if text is not None and len(text) > NOTE_MAX:
        raise StoreError(f"a note holds at most {NOTE_MAX} characters, this one {len(text)}")
    sweep_id = s.scalar(select(Sweep.id).where(Sweep.name == name))
    if sweep_id is None:
        raise StoreError(f"no sweep named {name!r} in {url}")
    _set(s, sweep_id, note=text or None)


def _set(s: Session, sweep_id: int, **values) -> None:
    # updated_at set to itself: an annotation does not make a sweep the most recent one
    s.execute(
        update(Sweep).where(Sweep.id == sweep_id).values(**values, updated_at=Sweep.updated_at)
    )
