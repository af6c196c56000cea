"""The time a running sweep has left, for `orch status`, from its finished trials' timestamps."""

from __future__ import annotations


def eta_s(finished: list[tuple[float, float]], remaining: int) -> float | None:
    """Seconds until `remaining` trials are done, at the rate the latest trials finished.

    `finished`: (started_at, finished_at) of the latest finished trials. The rate is their
    count over the time from the first one's start to the last one's end, so that parallel
    workers count by themselves (two workers finishing a 10 s trial each every 10 s: 5 s a
    trial). Only the current stretch of work counts: going back in time, a pause longer than
    a trial ends it (an earlier run, before a Ctrl-C and `orch resume`). None when nothing
    finished yet or nothing is left.
    """
    if remaining <= 0 or not finished:
        return None
    latest = sorted(finished, key=lambda t: t[1], reverse=True)
    taken = latest[:1]
    start = latest[0][0]
    for s, f in latest[1:]:
        mean = sum(b - a for a, b in taken) / len(taken)
        if f < start - mean:  # a pause longer than a trial: an earlier run
            break
        taken.append((s, f))
        start = min(start, s)
    span = latest[0][1] - start
    return remaining * span / len(taken) if span > 0 else None


def format_eta(seconds: float | None) -> str:
    """`1h 05m`, `3m 20s`, `42s`; `-` for None."""
    if seconds is None:
        return "-"
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s}s"
