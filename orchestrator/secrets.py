"""Keeping the database password out of process listings and out of Ray.

The URL can come from `--db`, `--db-file PATH`, `ORCH_DB_URL` or `ORCH_DB_URL_FILE`
(db.session.resolve_url). Only `--db` puts it on a command line; `orch` then overwrites the
password in its own command line as soon as it starts (`hide_in_cmdline`), so `ps` and Ray's
record of the driver's entrypoint (read from /proc at `ray.init`) show `***` instead. Ray
processes started by the Ray executor never receive the URL: workers do not touch the
database, and `ORCH_DB_URL` is removed from the environment they inherit.
"""

from __future__ import annotations

import sys

from db.session import secret_forms


def passwords_in_args(args: list[str]) -> set[str]:
    """Every form of every password of a database URL among `args` (`--db URL`, `--db=URL`)."""
    found: set[str] = set()
    for a in args:
        value = a.split("=", 1)[1] if a.startswith("--db=") else a
        if "://" in value:
            found |= secret_forms(value)
    return found


def hide_in_cmdline(secrets: set[str]) -> bool:
    """Overwrite each of `secrets` with `*` in this process's command line as the kernel shows
    it (/proc/self/cmdline, read by `ps` and by Ray) and in `sys.argv`. Linux only; False where
    the command line could not be rewritten."""
    if not secrets:
        return True
    sys.argv[:] = [_masked(a, secrets) for a in sys.argv]
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[48 - 3]), int(fields[49 - 3])  # arg_start, arg_end (proc(5))
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(start)
            before = mem.read(end - start)
            after = before
            for s in sorted(secrets, key=len, reverse=True):
                raw = s.encode()
                after = after.replace(raw, b"*" * len(raw))
            if after != before:
                mem.seek(start)
                mem.write(after)
        return True
    except (OSError, ValueError, IndexError):
        return False


def _masked(text: str, secrets: set[str]) -> str:
    for s in sorted(secrets, key=len, reverse=True):
        text = text.replace(s, "*" * len(s))
    return text
