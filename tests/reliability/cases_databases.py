"""Bad databases and executors (tests/reliability/cases.py): database files and servers, where
the database URL comes from, Ray addresses, trials that all fail."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import create_engine, text

from tests.reliability.harness import BOTH, SUBMIT, Case, Ctx, sweep


def _stamp_future_revision(ctx: Ctx) -> None:
    engine = create_engine(ctx.db)
    with engine.begin() as c:
        c.execute(text("UPDATE alembic_version SET version_num = '0999_future'"))
    engine.dispose()


def _read_only_db_file(ctx: Ctx) -> None:
    ctx.db_file.chmod(0o444)  # the folder stays writable


def _read_only_db_folder(ctx: Ctx) -> None:
    (ctx.work / "home").mkdir()
    ctx.work.chmod(0o555)  # the file is writable, but no -wal or -shm can be made beside it


def _every_trial_fails(ctx: Ctx) -> None:
    """A worker that runs out of memory on every trial (raised inside the trial)."""

    def oom(*a, **k):
        raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB")

    ctx.monkeypatch.setattr("orchestrator.run.executors.local.run_trial", oom)


def _db_url_file(content: str) -> Callable[[Ctx], None]:
    def prepare(ctx: Ctx) -> None:
        (ctx.work / "db-url").write_text(content)

    return prepare


READ_MISSING = {
    "status": ("status",),
    "query": ("query", "--best-by", "throughput"),
    "compare": ("compare",),
    "export": ("export",),
    "plot": ("plot", "-o", "{work}/plots"),
    "report": ("report", "-o", "{work}/report"),
    "cancel": ("cancel", "existing"),
    "resume": ("resume", "--executor", "local"),
    "db-current": ("db", "current"),
    "ui": ("ui", "--port", "0"),
    "tag": ("tag", "existing", "x"),
    "note": ("note", "existing"),
}

CASES: list[Case] = [
    # -- databases
    Case(
        "schema-newer-than-code",
        ("status", "--db", "{db}"),
        "has schema revision 0999_future, newer than this code",
        prepare=_stamp_future_revision,
        backends=BOTH,
    ),
    Case(
        "db-upgrade-schema-newer-than-code",
        ("db", "upgrade", "--db", "{db}"),
        "has schema revision 0999_future, newer than this code",
        prepare=_stamp_future_revision,
    ),
    Case(
        "submit-schema-newer-than-code",
        SUBMIT,
        "has schema revision 0999_future, newer than this code",
        spec=sweep(),
        prepare=_stamp_future_revision,
        backends=BOTH,
    ),
    Case(
        "read-only-sqlite-file",
        SUBMIT,
        "database file {work}/lab.db is read-only",
        spec=sweep(),
        runner="unprivileged",
        prepare=_read_only_db_file,
    ),
    Case(
        "read-only-sqlite-folder",
        SUBMIT,
        "folder {work} of database file {work}/lab.db is read-only",
        spec=sweep(),
        runner="unprivileged",
        prepare=_read_only_db_folder,
    ),
    Case(
        "resume-read-only-sqlite-file",
        ("resume", "existing", "--db", "{db}", "--executor", "local"),
        "database file {work}/lab.db is read-only",
        runner="unprivileged",
        prepare=_read_only_db_file,
    ),
    Case(
        "cancel-read-only-sqlite-folder",
        ("cancel", "existing", "--db", "{db}"),
        "folder {work} of database file {work}/lab.db is read-only",
        runner="unprivileged",
        prepare=_read_only_db_folder,
    ),
    *[
        Case(
            f"{name}-missing-sqlite-file",
            (*args, "--db", "sqlite:///{work}/typo.db"),
            "no database file {work}/typo.db",
            db="missing",
        )
        for name, args in READ_MISSING.items()
    ],
    Case(
        "status-postgres-without-schema",
        ("status", "--db", "{db}"),
        "has no orch tables yet",
        backends=("postgres",),
        db="empty",
    ),
    Case(
        "db-url-unparseable",
        ("status", "--db", "not a url"),
        "invalid database URL",
        db="missing",
    ),
    # -- executors
    Case(
        "accelerator-gpu-without-gpus",
        ("submit", "{spec}", "--db", "{db}", "--executor", "ray", "--accelerator", "gpu"),
        "--accelerator gpu: this machine has no GPU",
        spec=sweep(),
        needs="no-cuda",
        backends=BOTH,
    ),
    Case(
        "local-executor-hardware-not-here",
        SUBMIT,
        "hardware A100, H100: the local executor runs trials on this machine, which has cpu",
        spec=sweep(extra="hardware: [cpu, H100, A100]\n"),
        needs="no-cuda",
        backends=BOTH,
    ),
    Case(
        "ray-hardware-not-in-the-cluster",
        ("submit", "{spec}", "--db", "{db}", "--executor", "ray"),
        "hardware L4: the Ray cluster has no node of that type (it has: cpu)",
        spec=sweep(extra="hardware: [l4]\n"),
        needs="no-cuda",
    ),
    Case(
        "ray-accelerator-contradicts-hardware",
        ("submit", "{spec}", "--db", "{db}", "--executor", "ray", "--accelerator", "cpu"),
        "--accelerator cpu contradicts the sweep's hardware H100",
        spec=sweep(extra="hardware: [cpu, H100]\n"),
    ),
    Case(
        "ray-address-refused",
        ("submit", "{spec}", "--db", "{db}", "--executor", "ray", "--address", "127.0.0.1:9"),
        "cannot reach the Ray cluster at 127.0.0.1:9",
        spec=sweep(),
        runner="proc",
        timeout=120,
        backends=BOTH,
    ),
    Case(
        "ray-address-malformed",
        ("submit", "{spec}", "--db", "{db}", "--executor", "ray", "--address", "head node"),
        "--address 'head node' is not auto, local, HOST:PORT or ray://HOST:PORT",
        spec=sweep(),
        runner="proc",
        timeout=120,
    ),
    Case(
        "every-trial-failed",
        SUBMIT,
        "1 of 1 trials failed",
        spec=sweep(),
        code=1,
        prepare=_every_trial_fails,
        writes=True,
        backends=BOTH,
    ),
    # -- where the database URL comes from
    Case(
        "db-file-missing",
        ("status", "--db-file", "{work}/no-such-file"),
        "cannot read --db-file {work}/no-such-file: No such file or directory",
        db="missing",
    ),
    Case(
        "db-file-empty",
        ("status", "--db-file", "{work}/db-url"),
        "--db-file {work}/db-url is empty",
        prepare=_db_url_file("\n"),
        db="missing",
    ),
    Case(
        "db-and-db-file",
        ("status", "--db", "{db}", "--db-file", "{work}/db-url"),
        "give --db or --db-file, not both",
        prepare=_db_url_file("sqlite:///x.db"),
    ),
    Case(
        "db-url-file-env-missing",
        ("status",),
        "cannot read ORCH_DB_URL_FILE {work}/gone: No such file or directory",
        env=(("ORCH_DB_URL_FILE", "{work}/gone"),),
        db="missing",
    ),
]
