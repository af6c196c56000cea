"""The run log: library warnings and log lines of one sweep run go to a file, not the terminal.

A sweep run (`orch submit`, `orch resume`) writes `ORCH_HOME/logs/<sweep>-<UTC time>-<pid>.log`
and prints its path once. Inside `run_log`:

- Python warnings (transformers' FutureWarnings, ...) are captured by `logging` (logger
  `py.warnings`) instead of being printed, also inside the progress bar;
- the loggers of the libraries we drive (LIBRARY_LOGGERS: Ray's start-up lines and its
  token-authentication warning, transformers, torch, ...) lose their terminal handlers and
  propagate to the root logger, whose file handler writes the log.

With `verbose` their terminal handlers stay, and warnings are printed on stderr as well as
logged. On leaving, every logger and the warnings machinery are put back as they were.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from engine.fetch import orch_home

LIBRARY_LOGGERS = (
    "py.warnings",
    "ray",
    "transformers",
    "torch",
    "huggingface_hub",
    "accelerate",
    "filelock",
    "urllib3",
)
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def log_path(sweep: str, now: float | None = None) -> Path:
    """Where the run log of a run of `sweep` starting at `now` goes (ORCH_HOME/logs)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() if now is None else now))
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", sweep).strip("._")[:80] or "sweep"
    return orch_home() / "logs" / f"{safe}-{stamp}-{os.getpid()}.log"


def _is_terminal(h: logging.Handler) -> bool:
    return isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)


def _configure_libraries(executor: str) -> None:
    """Import what installs its own handlers on import, so that they exist to be taken off:
    Ray (on import) and transformers (on its first logger)."""
    if executor == "ray":
        with contextlib.suppress(ImportError):
            import ray  # noqa: F401  # lazy: Ray
    with contextlib.suppress(ImportError):
        from transformers.utils import logging as hf_logging  # lazy: transformers

        hf_logging.get_logger("transformers")


def _open(path: Path) -> logging.FileHandler:
    """A file handler on `path`, else on the same name in the temp folder (an ORCH_HOME this
    user cannot write must not stop a sweep)."""
    for where in (path, Path(tempfile.gettempdir()) / "orch-logs" / path.name):
        try:
            where.parent.mkdir(parents=True, exist_ok=True)
            return logging.FileHandler(where, encoding="utf-8")
        except OSError as e:
            error = e
    raise error


@contextlib.contextmanager
def run_log(sweep: str, verbose: bool = False, executor: str = "local") -> Iterator[Path]:
    """Route library warnings and logging to a new run log file of `sweep`; yields its path."""
    path = log_path(sweep)
    _configure_libraries(executor)
    handler = _open(path)
    handler.setFormatter(logging.Formatter(FORMAT))
    root = logging.getLogger()
    saved = {}
    for name in LIBRARY_LOGGERS:
        lg = logging.getLogger(name)
        saved[name] = (list(lg.handlers), lg.propagate)
        if not verbose:
            for h in [h for h in lg.handlers if _is_terminal(h)]:
                lg.removeHandler(h)
        lg.propagate = True
    echo = None
    if verbose:  # warnings have no handler of their own: print them as Python would
        echo = logging.StreamHandler(sys.stderr)
        echo.setFormatter(logging.Formatter("%(message)s"))
        logging.getLogger("py.warnings").addHandler(echo)
    root.addHandler(handler)
    capturing = logging._warnings_showwarning is not None  # type: ignore[attr-defined]
    logging.captureWarnings(True)
    try:
        yield Path(handler.baseFilename)
    finally:
        if not capturing:
            logging.captureWarnings(False)
        root.removeHandler(handler)
        handler.close()
        for name, (handlers, propagate) in saved.items():
            lg = logging.getLogger(name)
            lg.handlers[:] = handlers
            lg.propagate = propagate
