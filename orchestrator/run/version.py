"""The code version every trial and sweep records, and `orch --version` shows: the git commit
of this checkout (+dirty), else the installed package's version."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

# tracked files a run may write that are not code: a SQLite database kept in the repository
# (docs/repro/orch.db) changes with every trial run into it, and must not mark the code +dirty
NOT_CODE = (":(exclude)*.db", ":(exclude)*.sqlite", ":(exclude)*.sqlite3")


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """The git commit of this checkout (+dirty), else the installed package version: read
    once per process, before it imports the engine (trial.py: get_pair, run_trial), so that a
    worker records the code it runs even when the checkout moves on while it works (a
    long-lived Ray actor; in session 8 trials recorded the HEAD at their first result, 30
    minutes after the actor had imported an older engine)."""
    return git_version(Path(__file__).resolve().parents[2]) or installed_version()


def git_version(root: Path) -> str | None:
    """HEAD of the checkout at `root`, +dirty when a tracked file other than a database
    (NOT_CODE) has uncommitted changes; None outside a git checkout."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        if not sha:
            return None
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", *NOT_CODE],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
        return sha + ("+dirty" if dirty.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def installed_version() -> str:
    try:
        from importlib.metadata import version  # lazy: importlib.metadata (a third of orch --help)

        return "treespec-orch " + version("treespec-orch")
    except Exception:  # noqa: BLE001 - not installed either
        return "unknown"
