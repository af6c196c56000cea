"""The bad-input harness: a case of the table (tests/reliability/cases.py), and how to run one
(in-process with CliRunner, in a real process, or in a real process as an unprivileged user
for the permission cases) and judge it.

Every case must end with exactly one stderr line `error: ...` naming the problem, its exit
code (2 for bad input), no traceback, and the database exactly as it was (row counts of every
table; no database file where none was).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, func, inspect, select, text

from tests.orchestrator.orch_helpers import REPO, fake_config, fake_result

CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, PR_CAPBSET_DROP = 1, 2, 24

BASE = """\
name: {name}
pairs: [{{target: {target}, draft: tiny-llama-draft}}]
dataset: {dataset}
max_new_tokens: {mnt}
{extra}methods:
{methods}"""


def sweep(
    methods: str = "  - name: linear\n",
    extra: str = "",
    name: str = "bad-input",
    target: str = "tiny-llama",
    dataset: str = "{name: spec_bench, prompts: 1, prompt_tokens: 8}",
    mnt: str = "4",
) -> str:
    """A sweep file that is valid except for what the arguments put in."""
    return BASE.format(
        name=name, target=target, dataset=dataset, mnt=mnt, extra=extra, methods=methods
    )


@dataclass(frozen=True)
class Case:
    id: str
    args: tuple[str, ...]  # `orch` arguments; {spec} {db} {work} are filled in
    needle: str  # what the one error line must say
    spec: str | bytes | None = None  # the sweep file {spec}
    code: int = 2
    # cli: CliRunner; proc: a real process; unprivileged: a real process that file permissions
    # apply to (as root: without the capabilities that bypass them)
    runner: str = "cli"
    backends: tuple[str, ...] = ("sqlite",)  # where {db} lives: sqlite and/or postgres
    db: str = "populated"  # populated | missing (a SQLite path that must stay absent) | empty
    prepare: Callable[[Any], None] | None = None  # ctx -> None: files, permissions, patches
    env: tuple[tuple[str, str], ...] = ()
    writes: bool = False  # the command legitimately writes (it ran trials)
    needs: str | None = None  # "no-cuda": only where CUDA is absent
    timeout: float = 240


@dataclass
class Ctx:
    work: Path  # a folder for this case's files
    db: str  # database URL
    db_file: Path | None  # the SQLite file behind `db`
    spec: Path
    monkeypatch: Any = None
    env: dict[str, str] = field(default_factory=dict)

    def fill(self, s: str) -> str:
        for key, value in (("{spec}", self.spec), ("{db}", self.db), ("{work}", self.work)):
            s = s.replace(key, str(value))
        return s


@dataclass(frozen=True)
class Outcome:
    code: int | None  # None: timed out
    stdout: str
    stderr: str
    traceback: bool
    seconds: float


SUBMIT = ("submit", "{spec}", "--db", "{db}", "--executor", "local")
BOTH = ("sqlite", "postgres")
GEN = ("generate", "--prompt", "Hi", "--max-new-tokens", "2")


# ----------------------------------------------------------------------------- running


def populate(url: str) -> None:
    """One sweep with two trials, one of them finished (so export and plot have rows)."""
    from orchestrator.store import Store

    store = Store(url)
    a, b = fake_config(1), fake_config(2)
    info = store.submit("existing", {"name": "existing"}, [a, b], "v")
    first = min(t for t, _, _ in store.runnable(info.sweep_id))
    store.mark_running(first, "h", None)
    store.record_result(first, fake_result(a))
    store.close()


def counts(url: str) -> dict[str, int]:
    """Rows per table, every table the database has (alembic_version included)."""
    engine = create_engine(url)
    try:
        with engine.connect() as c:
            names = inspect(c).get_table_names()
            return {n: c.scalar(select(func.count()).select_from(text(f'"{n}"'))) for n in names}
    finally:
        engine.dispose()


def drop_file_capabilities() -> None:
    """In the child before exec: as root, give up the capabilities that bypass file
    permissions (from the bounding set, so the new program never gets them)."""
    import ctypes

    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def run(case: Case, ctx: Ctx) -> Outcome:
    args = [ctx.fill(a) for a in case.args]
    env = {**{k: ctx.fill(v) for k, v in case.env}, **ctx.env}
    start = time.monotonic()
    if case.runner == "cli":
        from click.testing import CliRunner

        from orchestrator.cli import main

        r = CliRunner().invoke(main, args, env=env)
        tb = r.exception is not None and not isinstance(r.exception, SystemExit)
        return Outcome(r.exit_code, r.stdout, r.stderr, tb, time.monotonic() - start)
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **env}
    preexec = None
    if case.runner == "unprivileged":
        home = ctx.work / "home"
        home.mkdir(exist_ok=True)
        full_env.update(HOME=str(home), MPLCONFIGDIR=str(home / "mpl"))
        preexec = drop_file_capabilities

    try:
        p = subprocess.run(
            [sys.executable, "-m", "orchestrator.cli", *args],
            cwd=ctx.work,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=case.timeout,
            preexec_fn=preexec,
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return Outcome(None, out, err, "Traceback" in err, time.monotonic() - start)
    tb = "Traceback" in p.stderr or "Traceback" in p.stdout
    return Outcome(p.returncode, p.stdout, p.stderr, tb, time.monotonic() - start)


def setup(case: Case, work: Path, url: str, monkeypatch: Any = None) -> Ctx:
    """Write the sweep file, prepare the database and the case's own files."""
    db_file = None
    if url.startswith("sqlite:///"):
        db_file = Path(url.removeprefix("sqlite:///"))
    ctx = Ctx(work=work, db=url, db_file=db_file, spec=work / "sweep.yaml", monkeypatch=monkeypatch)
    if case.db == "populated":
        populate(url)
    if isinstance(case.spec, bytes):
        ctx.spec.write_bytes(case.spec)
    elif case.spec is not None:
        ctx.spec.write_text(ctx.fill(case.spec))
    if case.prepare is not None:
        case.prepare(ctx)
    return ctx


def classify(case: Case, ctx: Ctx, out: Outcome, before: dict | None, after: dict | None) -> str:
    """'clean', or what went wrong: hang, traceback, accepted, half-write, unclear."""
    if out.code is None:
        return "hang"
    if out.code < 0:
        return f"crash (signal {-out.code})"
    if out.traceback:
        return "traceback"
    changed = before != after
    if case.db == "missing" and any((ctx.work / f).exists() for f in ("typo.db", "orch.db")):
        changed = True
    if out.code == 0:
        return "accepted" + (" (rows written)" if changed and not case.writes else "")
    if changed and not case.writes:
        return "half-write"
    errors = [ln for ln in out.stderr.splitlines() if ln.startswith("error: ")]
    lines = out.stderr.strip().splitlines()
    one_line = len(errors) == 1 and (case.writes or len(lines) == 1) and lines[-1] == errors[0]
    if not one_line or ctx.fill(case.needle) not in errors[0] or out.code != case.code:
        return "unclear"
    return "clean"


def cleanup(work: Path) -> None:
    for p in [work, *work.rglob("*")]:
        if p.is_dir() and not p.is_symlink():
            p.chmod(0o755)
    shutil.rmtree(work, ignore_errors=True)
