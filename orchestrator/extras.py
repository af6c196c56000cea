"""Optional installs (the extras of pyproject.toml), checked before anything is written: a
missing one is one line `error: ...` with the `pip install` that fixes it, not a traceback
after the sweep's trials are in the database."""

from __future__ import annotations

import importlib

from engine.config import ConfigError

EXTRAS = {"ray": "ray", "matplotlib": "plots", "pyarrow": "plots", "psycopg": "postgres"}


class MissingExtra(ConfigError):
    """An optional package a command needs is not installed (or does not import)."""


def require(module: str, needed_by: str, otherwise: str = "") -> None:
    """Import `module` or raise MissingExtra naming `needed_by` and the pip line (`otherwise`:
    what to do instead, e.g. `or --executor local`)."""
    try:
        importlib.import_module(module)
    except ImportError as e:
        broken = f" ({module} does not import: no module {e.name!r})" if e.name != module else ""
        hint = f", {otherwise}" if otherwise else ""
        raise MissingExtra(
            f"{needed_by} needs {module}, which is not installed{broken}: "
            f"pip install 'treespec-orch[{EXTRAS[module]}]'{hint}"
        ) from None
